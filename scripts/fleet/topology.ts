// The fleet on one machine, without Docker: an API process, N gateway nodes and M workers of src/main.ts on the
// same stores, behind a real balancer: nginx stream (UDP for CoAP/DTLS, TCP for the device HTTPS port and the API), or
// nftables destination NAT in a network namespace of the fleet's own, which keeps each device's address (nft.ts).
// `npm run fleet` runs it by hand; the fleet tests and the bench start it from here.
//
// The fleet is the nodes' supervisor: a gateway node that exits when the fleet did not stop it (SIGKILL, a crash) is
// taken out of the balancer at once, its flows end (nft: their conntrack entries), and its node id in the cluster
// directory is given back for it (evictNode), so the other nodes carry its sessions on from Redis at the devices'
// next records instead of forwarding them to a dead port until its lease runs out.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Cluster, Redis as SingleRedis } from 'ioredis';
import { evictNode } from '../../src/gateway/cluster-registry.ts';
import { hostPort, LIMITS_BEHIND_NGINX, reachable, startBalancer, type BalancedPort, type Balancer } from './nginx.ts';
import { startNftBalancer } from './nft.ts';
import { freePort } from './ports.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const MAIN = path.join(ROOT, 'src/main.ts');

export type NodeRole = 'api' | 'gateway' | 'worker';

export interface FleetOptions {
  gateways: number;
  workers: number;
  /** every process's environment: DATABASE_URL, REDIS_URL or REDIS_CLUSTER_NODES, SECRET_KEY, QUEUE_NAME, ... */
  env: Record<string, string>;
  /** extra environment of one node (e.g. its own cluster port) */
  nodeEnv?: (role: NodeRole, index: number) => Promise<Record<string, string>> | Record<string, string>;
  /** the balancer's public ports (0 or unset: free ones) */
  ports?: { api?: number; https?: number; coaps?: number };
  /**
   * the address nginx listens on and each node's API_HOST (default: 127.0.0.1 for nginx, the nodes' own API_HOST);
   * the device listeners of the gateway nodes bind every address (they have no setting for it)
   */
  host?: string;
  /** UDP balancing: round robin (default) or a hash of the source address and port */
  balance?: 'round-robin' | 'source';
  /**
   * nginx (default: every device has nginx's address; devices without CID lose their sessions when their flow moves)
   * or nft (destination NAT in a network namespace: devices run in it and keep their own addresses; needs root)
   */
  balancer?: 'nginx' | 'nft';
  /** where the balancer's config and each node's log go */
  dir: string;
  /** where a node's stdout and stderr go: its log file (default) or this process's */
  stdio?: 'file' | 'inherit';
  /** the gateway nodes form a CID-routed cluster (DTLS_CLUSTER_PORT: each node its own, kept across restarts) */
  cluster?: boolean;
}

export interface FleetNode {
  name: string;
  role: NodeRole;
  index: number;
  env: Record<string, string>;
  child: ChildProcess;
  /** /health and /metrics of this node (and the REST API on the api node) */
  apiPort: number;
  httpsPort: number;
  coapsPort: number;
  /** its inter-node port (DTLS_CLUSTER_PORT), kept across restarts; 0 when not a cluster node */
  clusterPort: number;
  /** where its stdout and stderr go (unless the fleet's stdio is 'inherit') */
  logFile: string;
  /** resolves once the fleet has handled its exit (out of the balancer, flows ended, node id given back) */
  gone: Promise<void>;
}

export interface Fleet {
  nodes: FleetNode[];
  balancer: Balancer;
  /** the balancer's ports: the deployment's public face (nft: the API's is the API node's own, reached directly) */
  ports: { api: number; https: number; coaps: number };
  /** where devices reach `ports.coaps` and `ports.https`: nginx's address, or the VIP inside `namespace` (nft) */
  deviceHost: string;
  /** nft: the network namespace the devices run in (`ip netns exec <namespace> ...`) */
  namespace?: string;
  apiBase: string;
  gateways(): FleetNode[];
  /**
   * SIGTERM (graceful) or SIGKILL the node, wait for it to go, start it again with the same ports, wait for /health.
   * A gateway node is out of the balancer meanwhile (nginx reloaded without it, then with it again): a datagram nginx
   * passes to a closed UDP port comes back as ICMP port unreachable, after which nginx reads no more answers on that
   * device's flow while it still passes the device's datagrams on (docs/fleet.md, "Deploys"). nft: out of the map before
   * the signal (new flows go elsewhere), its flows' conntrack entries deleted once it has exited (each device's next
   * datagram goes to a node that is up and carries the session on from what the node wrote to Redis), in again once healthy.
   */
  restart(node: FleetNode, signal?: 'SIGTERM' | 'SIGKILL'): Promise<FleetNode>;
  kill(node: FleetNode, signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
  /** the node's /metrics text */
  metrics(node: FleetNode): Promise<string>;
  stop(): Promise<void>;
}

async function waitHealthy(node: FleetNode, host: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // a node killed by a signal (a stop while it starts) has no exit code, only its signal
    if (node.child.exitCode !== null || node.child.signalCode !== null)
      throw new Error(`${node.name} exited during start (${node.child.exitCode ?? node.child.signalCode})`);
    try {
      if ((await fetch(`http://${hostPort(host, node.apiPort)}/health`)).ok) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) throw new Error(`${node.name} did not become healthy`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export function nodeMetric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? ([^ ]+)/.exec(line);
    if (!m || m[1] !== name) continue;
    if (Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

/** A client of the fleet's Redis (REDIS_CLUSTER_NODES or REDIS_URL of its environment), for the supervisor's evictions. */
function fleetRedis(env: Record<string, string>): SingleRedis | Cluster {
  const nodes = (env.REDIS_CLUSTER_NODES ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  if (nodes.length === 0) return new SingleRedis(env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 2 });
  return new Cluster(nodes.map((n) => ({ host: n.slice(0, n.lastIndexOf(':')), port: Number(n.slice(n.lastIndexOf(':') + 1)) })));
}

/** Starts the API node first (it migrates the database and writes missing certificates), then the gateways and workers, then the balancer. */
export async function startFleet(opts: FleetOptions): Promise<Fleet> {
  mkdirSync(opts.dir, { recursive: true });
  const nodes: FleetNode[] = [];
  // where this machine reaches a node's API (and nginx's public ports): its bind address, loopback for a wildcard
  const reach = reachable(opts.host ?? '127.0.0.1');
  const redis = opts.cluster ? fleetRedis(opts.env) : null;
  redis?.on('error', () => undefined); // an eviction that fails leaves the node to its lease
  let balancer: Balancer | null = null;
  let stopping = false;
  /** balancer changes one at a time: a node's exit and a restart's steps never interleave their reloads */
  let balancerQueue: Promise<unknown> = Promise.resolve();
  const serially = <T>(step: () => Promise<T>): Promise<T> => {
    const next = balancerQueue.then(step);
    balancerQueue = next.catch(() => undefined);
    return next;
  };
  const alive = (n: FleetNode) => n.child.exitCode === null && n.child.signalCode === null;
  const gateways = () => nodes.filter((n) => n.role === 'gateway');
  let balanced: (without?: FleetNode) => BalancedPort[] = () => [];
  /** the gateway nodes in the balancer's lists as last written */
  const inBalancer = new Set<FleetNode>();
  /** A gateway node exited: out of the balancer, its flows ended, its node id given back (it may not have left). */
  const nodeExited = async (node: FleetNode): Promise<void> => {
    if (!balancer || stopping) return;
    const b = balancer;
    // both at once: the balancer sends the node's devices elsewhere, the cluster stops forwarding to its dead port
    await Promise.all([
      serially(async () => {
        // nginx: a node already out of its lists (a restart drains it first) costs no reload, which would end every
        // device's flow once more; nft: the same map again, with its flows' conntrack entries ended
        if (b.kind === 'nginx' && !inBalancer.has(node)) return;
        inBalancer.delete(node);
        await b.reload(balanced(), [node.coapsPort, node.httpsPort]);
      }).catch(() => undefined),
      redis && node.clusterPort
        ? evictNode(redis, opts.env.QUEUE_NAME || 'device-events', { address: node.env.DTLS_CLUSTER_ADDRESS, port: node.clusterPort }).catch(() => undefined)
        : undefined,
    ]);
  };
  const spawnNode = (node: Omit<FleetNode, 'child' | 'logFile' | 'gone'>): FleetNode => {
    const logFile = path.join(opts.dir, `${node.name}.log`);
    const stdio = opts.stdio === 'inherit' ? 'inherit' : 'pipe';
    const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, node.role], {
      cwd: ROOT,
      env: node.env,
      stdio: ['ignore', stdio, stdio],
    });
    if (stdio === 'pipe') {
      // the file exists from the start, so `tail -f` on the log a fleet prints works before the node's first line
      writeFileSync(logFile, '', { flag: 'a' });
      const write = (d: Buffer) => {
        try {
          writeFileSync(logFile, d, { flag: 'a' });
        } catch {
          /* the folder went */
        }
      };
      child.stdout!.on('data', write);
      child.stderr!.on('data', write);
    }
    const spawned: FleetNode = { ...node, child, logFile, gone: Promise.resolve() };
    // the supervisor sees a gateway node's exit at once (a SIGKILL, a crash): no lease or health check to wait for
    if (node.role === 'gateway') spawned.gone = new Promise((resolve) => child.once('exit', () => void nodeExited(spawned).then(resolve)));
    return spawned;
  };
  const make = async (role: NodeRole, index: number, apiBase?: string): Promise<FleetNode> => {
    // nft balances the device ports only: the API node listens on the fleet's API port itself
    const apiPort = role === 'api' && opts.balancer === 'nft' && opts.ports?.api ? opts.ports.api : await freePort();
    const httpsPort = role === 'gateway' ? await freePort() : 0;
    const coapsPort = role === 'gateway' ? await freePort() : 0;
    const clusterPort = opts.cluster && role === 'gateway' ? await freePort() : 0;
    // a port of its own, kept across restarts: the supervisor finds a dead node's directory entry by it
    const cluster: Record<string, string> = clusterPort ? { DTLS_CLUSTER_PORT: String(clusterPort), DTLS_CLUSTER_ADDRESS: '127.0.0.1' } : {};
    const name = `${role}-${index + 1}`;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      LOG_LEVEL: 'warn',
      ...(role === 'gateway' && opts.balancer !== 'nft' ? LIMITS_BEHIND_NGINX : {}),
      ...opts.env,
      ...(opts.host !== undefined ? { API_HOST: opts.host } : {}),
      API_PORT: String(apiPort),
      HTTPS_DEVICE_PORT: String(httpsPort),
      COAPS_PORT: String(coapsPort),
      // workers push reports to the API node
      ...(apiBase && role !== 'api' ? { MONITORING_CORE_URL: apiBase } : {}),
      ...cluster,
      ...(await opts.nodeEnv?.(role, index)),
    };
    return spawnNode({ name, role, index, env, apiPort, httpsPort, coapsPort, clusterPort });
  };
  const stopNodes = async () => {
    await Promise.all(
      nodes.map(async (n) => {
        if (!alive(n)) return;
        const gone = new Promise((r) => n.child.once('exit', r));
        n.child.kill('SIGTERM');
        const t = setTimeout(() => n.child.kill('SIGKILL'), 15_000);
        await gone;
        clearTimeout(t);
      }),
    );
  };
  const closeRedis = () => redis?.quit().catch(() => redis.disconnect());
  try {
    const api = await make('api', 0);
    nodes.push(api);
    await waitHealthy(api, reach);
    const apiBase = `http://${hostPort(reach, api.apiPort)}`;
    for (let i = 0; i < opts.gateways; i++) nodes.push(await make('gateway', i, apiBase));
    for (let i = 0; i < opts.workers; i++) nodes.push(await make('worker', i, apiBase));
    await Promise.all(nodes.filter((n) => n.role !== 'api').map((n) => waitHealthy(n, reach)));
    const nft = opts.balancer === 'nft';
    const ports = {
      // nft balances the device ports only: the API is the API node's own port, reached directly
      api: nft ? api.apiPort : opts.ports?.api || (await freePort()),
      https: opts.ports?.https || (await freePort()),
      coaps: opts.ports?.coaps || (await freePort()),
    };
    let upstreamHost = '127.0.0.1';
    /** the balancer's ports, to every running gateway node but `without` */
    balanced = (without?: FleetNode): BalancedPort[] => {
      const up = gateways().filter((g) => g !== without && alive(g));
      return [
        { listen: ports.coaps, protocol: 'udp', upstreams: up.map((g) => hostPort(upstreamHost, g.coapsPort)), balance: opts.balance, host: opts.host },
        { listen: ports.https, protocol: 'tcp', upstreams: up.map((g) => hostPort(upstreamHost, g.httpsPort)), host: opts.host },
        ...(nft ? [] : [{ listen: ports.api, protocol: 'tcp' as const, upstreams: [hostPort(reach, api.apiPort)], host: opts.host }]),
      ];
    };
    if (nft) {
      mkdirSync(path.join(opts.dir, 'nft'), { recursive: true });
      const probe = await startNftBalancer(path.join(opts.dir, 'nft'), []);
      upstreamHost = probe.upstreamHost;
      await probe.reload(balanced());
      balancer = probe;
    } else {
      balancer = await startBalancer(path.join(opts.dir, 'nginx'), balanced());
    }
    const b = balancer;
    for (const g of gateways()) inBalancer.add(g);
    const kill = async (node: FleetNode, signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM') => {
      if (!alive(node)) return node.gone;
      node.child.kill(signal);
      await node.gone;
    };
    const fleet: Fleet = {
      nodes,
      balancer: b,
      ports,
      deviceHost: b.address ?? reach,
      namespace: nft && 'network' in b ? (b as Awaited<ReturnType<typeof startNftBalancer>>).network.namespace : undefined,
      apiBase: `http://${hostPort(reach, ports.api)}`,
      gateways,
      kill,
      async restart(node, signal = 'SIGTERM') {
        const drain = node.role === 'gateway' && gateways().length > 1;
        if (drain) {
          await serially(async () => {
            inBalancer.delete(node);
            await b.reload(balanced(node));
          });
        }
        // the node's exit takes it out of the balancer and ends its flows (nodeExited): its devices' next datagrams
        // go to a node that is up, which carries their sessions on from what this one wrote to Redis
        await kill(node, signal);
        // a stop that came while this node went down has already stopped the others: a node started now would outlive it
        if (stopping) throw new Error(`${node.name} not started again: the fleet is stopping`);
        const again = spawnNode({
          name: node.name,
          role: node.role,
          index: node.index,
          env: node.env,
          apiPort: node.apiPort,
          httpsPort: node.httpsPort,
          coapsPort: node.coapsPort,
          clusterPort: node.clusterPort,
        });
        nodes[nodes.indexOf(node)] = again;
        await waitHealthy(again, reach);
        if (node.role === 'gateway') {
          await serially(async () => {
            inBalancer.add(again);
            await b.reload(balanced());
          });
        }
        return again;
      },
      async metrics(node) {
        return (await fetch(`http://${hostPort(reach, node.apiPort)}/metrics`)).text();
      },
      async stop() {
        stopping = true;
        await stopNodes();
        await b.stop();
        await closeRedis();
      },
    };
    return fleet;
  } catch (err) {
    stopping = true;
    await stopNodes();
    await balancer?.stop();
    await closeRedis();
    throw err;
  }
}
