// A balancer that keeps device addresses, as a Kubernetes Service does: nftables destination NAT with connection
// tracking, in a network namespace of the fleet's own (the devices' network). Devices in the namespace send to a
// virtual address (VIP) and port; the first datagram of a flow (a new conntrack entry) is given a gateway node from a
// map (round robin: numgen inc; source: a jhash of the device's address and port), and every later datagram of the
// flow, and every answer back (its source turned back into the VIP), follows the conntrack entry. A node sees each
// device's own address and port, so a session kept in Redis under `a<address>:<port>` (a device without a Connection
// ID) is found by whichever node the device's next record reaches, and per-address limits count devices, not a proxy.
//
//   namespace <ns>: devices ── VIP:port ──(nft dnat, output hook)──▶ veth ──▶ host: <hostAddress>:<node port>
//
// Draining a node is kube-proxy's: the map without it (new flows go elsewhere), then, once it has stopped, its flows'
// conntrack entries deleted (`conntrack -D`), so each device's next datagram is a new flow to a node that is up. Needs
// root, `ip`, `nft` and `conntrack` (Debian: iproute2, nftables, conntrack).
import { execFile, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { BalancedPort, Balancer } from './nginx.ts';

const run = promisify(execFile);
const TABLE = 'gridgate';

/** Why the nft balancer cannot run here (not root, a tool missing), or null when it can. */
export function nftUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'the nft balancer needs root (a network namespace, nftables and conntrack)';
  for (const [tool, pkg] of [
    ['ip', 'iproute2'],
    ['nft', 'nftables'],
    ['conntrack', 'conntrack'],
  ] as const) {
    try {
      execFileSync(tool, ['--version'], { stdio: 'ignore' });
    } catch {
      if (tool !== 'ip') return `${tool} is missing (apt-get install ${pkg})`;
      try {
        execFileSync('ip', ['-V'], { stdio: 'ignore' });
      } catch {
        return `ip is missing (apt-get install ${pkg})`;
      }
    }
  }
  return null;
}

/** The namespace's addresses: host side .1, namespace side .2, the VIP .254 of 10.231.<subnet>.0/24. */
export interface NftNetwork {
  namespace: string;
  /** where the devices in the namespace reach the fleet's ports */
  vip: string;
  /** the host's end of the veth: what the nodes are reached at from the namespace */
  hostAddress: string;
  /** the namespace's end: the devices' own address */
  deviceAddress: string;
}

/** The nft script that replaces the fleet's table in one transaction (open flows keep their conntrack entries). */
export function nftRules(net: NftNetwork, ports: BalancedPort[]): string {
  const rules = ports
    .filter((p) => p.upstreams.length > 0)
    .map((p) => {
      const targets = p.upstreams.map((u, i) => `${i} : ${net.hostAddress} . ${u.slice(u.lastIndexOf(':') + 1)}`).join(', ');
      const pick = p.balance === 'source' ? `jhash ip saddr . ${p.protocol} sport mod ${p.upstreams.length}` : `numgen inc mod ${p.upstreams.length}`;
      return `    ip daddr ${net.vip} ${p.protocol} dport ${p.listen} dnat ip to ${pick} map { ${targets} }`;
    });
  // the output hook: the devices' own datagrams (they run in the namespace); prerouting: devices behind it
  const chain = (name: string, hook: string) => `  chain ${name} {\n    type nat hook ${hook} priority -100; policy accept;\n${rules.join('\n')}\n  }`;
  return `table ip ${TABLE}\ndelete table ip ${TABLE}\ntable ip ${TABLE} {\n${chain('local_flows', 'output')}\n${chain('routed_flows', 'prerouting')}\n}\n`;
}

async function inNamespace(namespace: string, args: string[]): Promise<string> {
  const { stdout } = await run('ip', ['netns', 'exec', namespace, ...args]);
  return stdout;
}

/** A free 10.231.<n>.0/24 and namespace name on this machine. */
async function pickNetwork(): Promise<NftNetwork> {
  const { stdout: addrs } = await run('ip', ['-o', '-4', 'addr']);
  const { stdout: namespaces } = await run('ip', ['netns', 'list']);
  for (let tries = 0; tries < 256; tries++) {
    const n = Math.floor(Math.random() * 254) + 1;
    const namespace = `gridgate-${n}`;
    if (addrs.includes(`10.231.${n}.`) || namespaces.split('\n').some((l) => l.split(' ')[0] === namespace)) continue;
    return { namespace, vip: `10.231.${n}.254`, hostAddress: `10.231.${n}.1`, deviceAddress: `10.231.${n}.2` };
  }
  throw new Error('no free 10.231.x.0/24 for the fleet network namespace');
}

export interface NftBalancer extends Balancer {
  network: NftNetwork;
}

/**
 * Creates the namespace (a veth pair to the host), loads the map of `ports`, and returns the balancer. `stop()`
 * deletes the namespace, and with it the veth pair, the table and its conntrack entries.
 */
export async function startNftBalancer(dir: string, ports: BalancedPort[]): Promise<NftBalancer> {
  const net = await pickNetwork();
  const { namespace } = net;
  const hostLink = `${namespace.replace('gridgate-', 'gg')}h`;
  const nsLink = `${namespace.replace('gridgate-', 'gg')}n`;
  const rulesFile = path.join(dir, 'nft-rules.nft');
  let up = true;
  const stop = async () => {
    if (!up) return;
    up = false;
    await run('ip', ['netns', 'del', namespace]).catch(() => undefined);
    await run('ip', ['link', 'del', hostLink]).catch(() => undefined); // gone with the namespace's end already
  };
  /**
   * One call into the namespace (a node that died is out of the map within one fork): the new map, then the conntrack
   * entries of the flows to `forget`'s ports, UDP and TCP (a TCP connection's entry deleted mid-stream sends its next
   * segment to another node, which answers RST: a node that stops is out of the map first, and its own close ends them).
   */
  const load = async (next: BalancedPort[], forget: number[] = []) => {
    writeFileSync(rulesFile, nftRules(net, next));
    const flows = forget.flatMap((port) => ['udp', 'tcp'].map((p) => `conntrack -D -p ${p} --reply-port-src ${port} >/dev/null 2>&1`));
    // conntrack -D exits 1 when no entry matched
    await inNamespace(namespace, ['sh', '-c', [`nft -f '${rulesFile}' || exit 1`, ...flows, 'true'].join('; ')]);
  };
  try {
    await run('ip', ['netns', 'add', namespace]);
    await run('ip', ['link', 'add', hostLink, 'type', 'veth', 'peer', 'name', nsLink, 'netns', namespace]);
    await run('ip', ['addr', 'add', `${net.hostAddress}/24`, 'dev', hostLink]);
    await run('ip', ['link', 'set', hostLink, 'up']);
    await inNamespace(namespace, ['ip', 'addr', 'add', `${net.deviceAddress}/24`, 'dev', nsLink]);
    await inNamespace(namespace, ['ip', 'link', 'set', nsLink, 'up']);
    await inNamespace(namespace, ['ip', 'link', 'set', 'lo', 'up']);
    await inNamespace(namespace, ['ip', 'route', 'add', 'default', 'via', net.hostAddress]);
    await load(ports);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    kind: 'nft',
    dir,
    network: net,
    pid: null,
    address: net.vip,
    upstreamHost: net.hostAddress,
    running: () => up,
    command: `ip netns exec ${namespace} nft list table ip ${TABLE}`,
    reload: (next, forget) => load(next, forget),
    stop,
  };
}
