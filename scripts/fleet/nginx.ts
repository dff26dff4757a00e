// A real L4 balancer for the fleet: Debian's nginx with its stream module, as a child process with its own prefix
// folder (no root install, no system config). UDP for CoAP/DTLS and TCP for the HTTPS device port and the API.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const NGINX = process.env.NGINX_BIN ?? '/usr/sbin/nginx';
const STREAM_MODULE = ['/usr/lib/nginx/modules/ngx_stream_module.so', '/usr/lib64/nginx/modules/ngx_stream_module.so'].find((p) => existsSync(p));

export interface BalancedPort {
  /** what nginx listens on */
  listen: number;
  protocol: 'udp' | 'tcp';
  /** host:port of each node */
  upstreams: string[];
  /** `round-robin` (nginx's default: each new client flow to the next node) or `source` (hash of the client address and port) */
  balance?: 'round-robin' | 'source';
  /** the address nginx listens on (default 127.0.0.1) */
  host?: string;
}

/** `host:port` as nginx's `listen` and `server` and a URL take it: an IPv6 address in brackets. */
export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Where this machine reaches a listener bound on `host`: a wildcard address is reached on loopback. */
export function reachable(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  return host === '::' ? '::1' : host;
}

/** The nginx command line that acts on the fleet's own nginx (its prefix and configuration), never the system's. */
export function nginxCommand(dir: string): string[] {
  return [NGINX, '-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'error.log')];
}

/** The fleet's balancer: nginx (this file) or nftables destination NAT in a network namespace (nft.ts). */
export interface Balancer {
  kind: 'nginx' | 'nft';
  dir: string;
  /** nginx's pid; null for nft (the kernel balances) */
  pid: number | null;
  running(): boolean;
  /** where devices reach the balanced ports (nft: the VIP, reached from the fleet's network namespace) */
  address: string | null;
  /** the address the balancer reaches the nodes at */
  upstreamHost: string;
  /** how to act on this balancer by hand (nginx: its command line, to which `-s reload` is added; nft: its table) */
  command: string;
  /**
   * rewrites the upstream lists (nginx: reloaded with SIGHUP): open flows stay on their node, but those to the node
   * ports in `forget` end (nft: their conntrack entries are deleted; nginx ends a reloaded worker's flows anyway), so
   * those devices' next datagrams are new flows, given a node of the new lists
   */
  reload(ports: BalancedPort[], forget?: number[]): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Behind nginx every device comes from nginx's address: the per-address limits of a gateway node would cap the whole
 * fleet's devices at one address's share (1,000 DTLS sessions, 100 handshakes/s). `npm run fleet -- --balancer nginx`
 * raises them to these unless the operator set them, and the compose fleet (docker-compose.yml) sets the same; the nft
 * balancer keeps device addresses and the defaults mean what they say.
 */
export const LIMITS_BEHIND_NGINX: Readonly<Record<string, string>> = {
  DTLS_MAX_SESSIONS_PER_ADDRESS: '10000000',
  DTLS_HANDSHAKE_RATE_PER_ADDRESS: '100000',
  DTLS_HANDSHAKE_BURST_PER_ADDRESS: '100000',
  HTTPS_MAX_CONNECTIONS_PER_ADDRESS: '10000000',
  HTTPS_HANDSHAKE_RATE_PER_ADDRESS: '100000',
  HTTPS_HANDSHAKE_BURST_PER_ADDRESS: '100000',
};

/** What differs between the fleet's nginx (a child process with its own prefix) and the compose fleet's (a container). */
export interface StreamConfigOptions {
  /**
   * worker processes: 1 for the fleet's own nginx; `auto` for the container. More than one worker needs `reuseport` on
   * the UDP listen (each worker its own socket, the kernel hashing a device's address and port to one of them):
   * without it any worker may read a device's next datagram and open a second flow, to another node
   */
  workers: number | 'auto';
  /** `load_module` path of the stream module (Debian's nginx has it as a module; the official image builds it in) */
  streamModule?: string;
  /** pid file and error log (default: nginx's own) */
  pidFile?: string;
  errorLog?: string;
  /** upstream names by position in `ports` (default `up<i>_<protocol>_<port>`) */
  names?: string[];
}

/**
 * The one template of the fleet's balancer: nginx's stream configuration for `ports`, for `npm run fleet` (nginxConfig)
 * and for deploy/nginx/fleet.conf (deployNginxConfig). A UDP flow (client address and port) stays on its node until
 * 60 s without datagrams; DTLS flights are several datagrams and answers go back through the same flow.
 */
export function renderStreamConfig(ports: BalancedPort[], opts: StreamConfigOptions): string {
  const blocks = ports
    .map((p, i) => {
      const name = opts.names?.[i] ?? `up${i}_${p.protocol}_${p.listen}`;
      const hash = p.balance === 'source' ? '    hash $remote_addr$remote_port consistent;\n' : '';
      const servers = p.upstreams.map((u) => `    server ${u} max_fails=0;\n`).join('');
      const address = hostPort(p.host ?? '127.0.0.1', p.listen);
      const listen = p.protocol === 'udp' ? `${address} udp${opts.workers === 1 ? '' : ' reuseport'}` : address;
      const timeouts = p.protocol === 'udp' ? '    proxy_timeout 60s;\n' : '    proxy_timeout 10m;\n    proxy_connect_timeout 2s;\n';
      return `  upstream ${name} {\n${hash}${servers}  }\n  server {\n    listen ${listen};\n    proxy_pass ${name};\n${timeouts}  }\n`;
    })
    .join('');
  return [
    ...(opts.streamModule ? [`load_module ${opts.streamModule};`] : []),
    `worker_processes ${opts.workers};`,
    ...(opts.pidFile ? [`pid ${opts.pidFile};`] : []),
    ...(opts.errorLog ? [`error_log ${opts.errorLog} warn;`] : []),
    'events { worker_connections 8192; }',
    `stream {\n${blocks}}`,
    '',
  ].join('\n');
}

/** nginx.conf of the fleet's own nginx (`npm run fleet -- --balancer nginx`, the tests): one worker, files in `dir`. */
export function nginxConfig(dir: string, ports: BalancedPort[]): string {
  return renderStreamConfig(ports, { workers: 1, streamModule: STREAM_MODULE, pidFile: path.join(dir, 'nginx.pid'), errorLog: path.join(dir, 'error.log') });
}

/** The compose fleet's node ports (each container's defaults of docs/configuration.md), which its balancer publishes as they are. */
export const COMPOSE_PORTS = { coaps: 5684, https: 8443, api: 8080 } as const;

const DEPLOY_HEADER = `# GENERATED by \`node scripts/fleet/nginx.ts --deploy > deploy/nginx/fleet.conf\` from the template that
# \`npm run fleet -- --balancer nginx\` runs (scripts/fleet/nginx.ts, renderStreamConfig); test/fleet/deploy-files.test.ts
# fails when this file differs from the rendering. Do not edit it by hand.
#
# The compose fleet's balancer (docker-compose.yml, profile fleet): plain L4, no TLS/DTLS termination. For fleets whose
# devices all use a Connection ID: a CID names the node that holds a DTLS session, and a node forwards records of other
# nodes' CIDs to them, but every device has nginx's address, so a device without CID loses its session when its flow
# moves (docs/fleet.md). The gateways' per-address limits are raised to fit (LIMITS_BEHIND_NGINX).
# Several workers: the UDP listen has \`reuseport\`, so each device's flow stays with one worker.
# nginx resolves the service names at start and at each reload only (\`resolve\` on a stream upstream server needs
# nginx 1.27.3; Debian 12's 1.22 has none): deploy/nginx/follow.sh reloads nginx when a name's address changes, so a
# recreated container is followed.
`;

/** deploy/nginx/fleet.conf: the same template for the compose fleet's service names, listening on every address. */
export function deployNginxConfig(gateways = ['gateway-1', 'gateway-2', 'gateway-3'], api = 'api'): string {
  const ports: BalancedPort[] = [
    { listen: COMPOSE_PORTS.coaps, protocol: 'udp', host: '0.0.0.0', upstreams: gateways.map((g) => `${g}:${COMPOSE_PORTS.coaps}`) },
    { listen: COMPOSE_PORTS.https, protocol: 'tcp', host: '0.0.0.0', upstreams: gateways.map((g) => `${g}:${COMPOSE_PORTS.https}`) },
    { listen: COMPOSE_PORTS.api, protocol: 'tcp', host: '0.0.0.0', upstreams: [`${api}:${COMPOSE_PORTS.api}`] },
  ];
  return DEPLOY_HEADER + renderStreamConfig(ports, { workers: 'auto', names: ['coaps', 'https', 'api'] });
}

async function listening(port: number, protocol: 'udp' | 'tcp', host: string): Promise<boolean> {
  if (protocol === 'udp') return true; // a UDP listener cannot be probed without a peer; nginx binds it before the TCP ones
  return new Promise((resolve) => {
    const s = net.connect(port, reachable(host));
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Starts nginx in the foreground (`daemon off`) with a prefix folder of its own, and waits until its TCP ports accept. */
export async function startBalancer(dir: string, ports: BalancedPort[]): Promise<Balancer> {
  mkdirSync(dir, { recursive: true });
  const conf = path.join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConfig(dir, ports));
  const [bin, ...args] = nginxCommand(dir);
  const child = spawn(bin, [...args, '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(
        `nginx exited (${child.exitCode}): ${stderr}${existsSync(path.join(dir, 'error.log')) ? readFileSync(path.join(dir, 'error.log'), 'utf8') : ''}`,
      );
    const up = await Promise.all(ports.map((p) => listening(p.listen, p.protocol, p.host ?? '127.0.0.1')));
    if (up.every(Boolean) && existsSync(path.join(dir, 'nginx.pid'))) break;
    if (Date.now() > deadline) throw new Error(`nginx did not listen: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    kind: 'nginx',
    dir,
    pid: child.pid ?? null,
    running: () => child.exitCode === null && child.signalCode === null,
    address: null,
    upstreamHost: '127.0.0.1',
    command: nginxCommand(dir).join(' '),
    async reload(next) {
      writeFileSync(conf, nginxConfig(dir, next));
      child.kill('SIGHUP');
      await new Promise((r) => setTimeout(r, 200));
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGQUIT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// node scripts/fleet/nginx.ts --deploy: prints deploy/nginx/fleet.conf
if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--deploy') process.stdout.write(deployNginxConfig());
