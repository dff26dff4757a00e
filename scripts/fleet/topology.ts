// The fleet on one machine, without Docker: an API process, N gateway nodes and M workers of src/main.ts on the
// same stores, behind a real nginx stream balancer (UDP for CoAP/DTLS, TCP for the device HTTPS port and the API).
// `npm run fleet` runs it by hand; the fleet tests and the bench start it from here.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { hostPort, reachable, startBalancer, type BalancedPort, type Balancer } from './nginx.ts';
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
  /** where its stdout and stderr go (unless the fleet's stdio is 'inherit') */
  logFile: string;
}

export interface Fleet {
  nodes: FleetNode[];
  balancer: Balancer;
  /** the balancer's ports: the deployment's public face */
  ports: { api: number; https: number; coaps: number };
  apiBase: string;
  gateways(): FleetNode[];
  /**
   * SIGTERM (graceful) or SIGKILL the node, wait for it to go, start it again with the same ports, wait for /health.
   * A gateway node is out of the balancer meanwhile (nginx reloaded without it, then with it again): a datagram nginx
   * passes to a closed UDP port comes back as ICMP port unreachable, after which nginx reads no more answers on that
   * device's flow while it still passes the device's datagrams on (docs/fleet.md, "Deploys").
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
    if (node.child.exitCode !== null || node.child.signalCode !== null) throw new Error(`${node.name} exited during start (${node.child.exitCode ?? node.child.signalCode})`);
    try {
      if ((await fetch(`http://${hostPort(host, node.apiPort)}/health`)).ok) return;
    } catch { /* not yet */ }
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

/** Starts the API node first (it migrates the database and writes missing certificates), then the gateways and workers, then nginx. */
export async function startFleet(opts: FleetOptions): Promise<Fleet> {
  mkdirSync(opts.dir, { recursive: true });
  const nodes: FleetNode[] = [];
  // where this machine reaches a node's API (and nginx's public ports): its bind address, loopback for a wildcard
  const reach = reachable(opts.host ?? '127.0.0.1');
  const spawnNode = (node: Omit<FleetNode, 'child' | 'logFile'>): FleetNode => {
    const logFile = path.join(opts.dir, `${node.name}.log`);
    const stdio = opts.stdio === 'inherit' ? 'inherit' : 'pipe';
    const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, node.role], { cwd: ROOT, env: node.env, stdio: ['ignore', stdio, stdio] });
    if (stdio === 'pipe') {
      // the file exists from the start, so `tail -f` on the log a fleet prints works before the node's first line
      writeFileSync(logFile, '', { flag: 'a' });
      const write = (d: Buffer) => { try { writeFileSync(logFile, d, { flag: 'a' }); } catch { /* the folder went */ } };
      child.stdout!.on('data', write);
      child.stderr!.on('data', write);
    }
    return { ...node, child, logFile };
  };
  const make = async (role: NodeRole, index: number, apiBase?: string): Promise<FleetNode> => {
    const apiPort = await freePort();
    const httpsPort = role === 'gateway' ? await freePort() : 0;
    const coapsPort = role === 'gateway' ? await freePort() : 0;
    const cluster: Record<string, string> = opts.cluster && role === 'gateway' ? { DTLS_CLUSTER_PORT: '0', DTLS_CLUSTER_ADDRESS: '127.0.0.1' } : {};
    const name = `${role}-${index + 1}`;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', LOG_LEVEL: 'warn',
      ...opts.env,
      ...(opts.host !== undefined ? { API_HOST: opts.host } : {}),
      API_PORT: String(apiPort), HTTPS_DEVICE_PORT: String(httpsPort), COAPS_PORT: String(coapsPort),
      // workers push reports to the API node
      ...(apiBase && role !== 'api' ? { MONITORING_CORE_URL: apiBase } : {}),
      ...cluster,
      ...(await opts.nodeEnv?.(role, index)),
    };
    return spawnNode({ name, role, index, env, apiPort, httpsPort, coapsPort });
  };
  const stopNodes = async () => {
    await Promise.all(nodes.map(async (n) => {
      if (n.child.exitCode !== null || n.child.signalCode !== null) return;
      const gone = new Promise((r) => n.child.once('exit', r));
      n.child.kill('SIGTERM');
      const t = setTimeout(() => n.child.kill('SIGKILL'), 15_000);
      await gone;
      clearTimeout(t);
    }));
  };
  let balancer: Balancer | null = null;
  try {
    const api = await make('api', 0);
    nodes.push(api);
    await waitHealthy(api, reach);
    const apiBase = `http://${hostPort(reach, api.apiPort)}`;
    for (let i = 0; i < opts.gateways; i++) nodes.push(await make('gateway', i, apiBase));
    for (let i = 0; i < opts.workers; i++) nodes.push(await make('worker', i, apiBase));
    await Promise.all(nodes.filter((n) => n.role !== 'api').map((n) => waitHealthy(n, reach)));
    const ports = {
      api: opts.ports?.api || await freePort(),
      https: opts.ports?.https || await freePort(),
      coaps: opts.ports?.coaps || await freePort(),
    };
    const gateways = () => nodes.filter((n) => n.role === 'gateway');
    /** the balancer's ports, to every gateway node but `without` */
    const balanced = (without?: FleetNode): BalancedPort[] => [
      { listen: ports.coaps, protocol: 'udp', upstreams: gateways().filter((g) => g !== without).map((g) => `127.0.0.1:${g.coapsPort}`), balance: opts.balance, host: opts.host },
      { listen: ports.https, protocol: 'tcp', upstreams: gateways().filter((g) => g !== without).map((g) => `127.0.0.1:${g.httpsPort}`), host: opts.host },
      { listen: ports.api, protocol: 'tcp', upstreams: [hostPort(reach, api.apiPort)], host: opts.host },
    ];
    balancer = await startBalancer(path.join(opts.dir, 'nginx'), balanced());
    const kill = async (node: FleetNode, signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM') => {
      if (node.child.exitCode !== null || node.child.signalCode !== null) return;
      const gone = new Promise((r) => node.child.once('exit', r));
      node.child.kill(signal);
      await gone;
    };
    let stopping = false;
    const fleet: Fleet = {
      nodes,
      balancer,
      ports,
      apiBase: `http://${hostPort(reach, ports.api)}`,
      gateways,
      kill,
      async restart(node, signal = 'SIGTERM') {
        const drain = node.role === 'gateway' && gateways().length > 1;
        if (drain) await balancer!.reload(balanced(node));
        await kill(node, signal);
        // a stop that came while this node went down has already stopped the others: a node started now would outlive it
        if (stopping) throw new Error(`${node.name} not started again: the fleet is stopping`);
        const again = spawnNode({ name: node.name, role: node.role, index: node.index, env: node.env, apiPort: node.apiPort, httpsPort: node.httpsPort, coapsPort: node.coapsPort });
        nodes[nodes.indexOf(node)] = again;
        await waitHealthy(again, reach);
        if (drain) await balancer!.reload(balanced());
        return again;
      },
      async metrics(node) {
        return (await fetch(`http://${hostPort(reach, node.apiPort)}/metrics`)).text();
      },
      async stop() {
        stopping = true;
        await balancer?.stop();
        await stopNodes();
      },
    };
    return fleet;
  } catch (err) {
    await balancer?.stop();
    await stopNodes();
    throw err;
  }
}
