// A real Redis Cluster for tests and the bench: redis-server processes with --cluster-enabled, joined by
// `redis-cli --cluster create`, their data in a temporary folder that stop() removes.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './ports.ts';
import { until } from './until.ts';

export interface ClusterNode {
  port: number;
  process: ChildProcess;
}

export interface RedisCluster {
  nodes: ClusterNode[];
  /** REDIS_CLUSTER_NODES for the service: every node */
  nodesEnv: string;
  /** the ports of the nodes that are masters now (each serving slots) */
  masterPorts(): Promise<number[]>;
  /** keys on the node at `port` (DBSIZE) */
  keyCount(port: number): Promise<number>;
  /** the port of a replica of the master at `port` */
  replicaOf(port: number): Promise<number>;
  /** kills the node at `port` with SIGKILL */
  kill(port: number): void;
  stop(): Promise<void>;
}

async function ask<T>(port: number, run: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return await run(r);
  } finally {
    r.disconnect();
  }
}

/** One line of CLUSTER NODES per node: `<id> <ip:port@bus> <flags> <master id or -> ... <slots>`. */
async function clusterNodes(port: number): Promise<{ id: string; port: number; flags: string[]; masterId: string; slots: boolean }[]> {
  const text = await ask(port, (r) => r.call('CLUSTER', 'NODES') as Promise<string>);
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const f = line.split(' ');
      return { id: f[0], port: Number(f[1].split('@')[0].split(':').at(-1)), flags: f[2].split(','), masterId: f[3], slots: f.length > 8 };
    });
}

/**
 * Starts `masters` masters with `replicasPerMaster` replicas each (3 and 1: six processes) on free ports and
 * waits until the cluster says ok on every node.
 */
export async function startRedisCluster(opts: { masters?: number; replicasPerMaster?: number } = {}): Promise<RedisCluster> {
  const masters = opts.masters ?? 3;
  const replicas = opts.replicasPerMaster ?? 1;
  const dir = mkdtempSync(path.join(tmpdir(), 'gg-redis-cluster-'));
  const nodes: ClusterNode[] = [];
  // freePort closes its probe socket at once, so two calls can name the same port: every port taken here is distinct
  const taken = new Set<number>();
  const distinctPort = async (): Promise<number> => {
    for (;;) {
      const p = await freePort();
      if (!taken.has(p)) {
        taken.add(p);
        return p;
      }
    }
  };
  for (let i = 0; i < masters * (1 + replicas); i++) {
    const port = await distinctPort();
    const busPort = await distinctPort();
    const nodeDir = path.join(dir, String(port));
    spawnSync('mkdir', ['-p', nodeDir]);
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--cluster-port',
        String(busPort),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        path.join(nodeDir, 'nodes.conf'),
        '--cluster-node-timeout',
        '1000',
        '--dir',
        nodeDir,
        '--appendonly',
        'no',
        '--save',
        '',
        '--daemonize',
        'no',
      ],
      { stdio: 'ignore' },
    );
    nodes.push({ port, process: child });
  }
  try {
    await join(nodes, masters, replicas);
  } catch (err) {
    // a cluster that did not form leaves no redis-server behind
    for (const n of nodes) n.process.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  const killed = new Set<number>();
  const alive = () => nodes.filter((n) => !killed.has(n.port) && n.process.exitCode === null && n.process.signalCode === null);
  /** the cluster's view, from the first live node that answers */
  const view = async () => {
    for (const n of alive()) {
      try {
        return await clusterNodes(n.port);
      } catch {
        // that node is going away: ask the next
      }
    }
    throw new Error('no node of the cluster answers');
  };
  const cluster: RedisCluster = {
    nodes,
    nodesEnv: nodes.map((n) => `127.0.0.1:${n.port}`).join(','),
    async masterPorts() {
      const all = await view();
      return all.filter((n) => n.flags.includes('master') && !n.flags.includes('fail') && n.slots).map((n) => n.port);
    },
    keyCount: (port) => ask(port, (r) => r.dbsize()),
    async replicaOf(port) {
      const all = await view();
      const master = all.find((n) => n.port === port);
      const replica = all.find((n) => n.masterId === master?.id && !n.flags.includes('fail'));
      if (!replica) throw new Error(`no replica of the master at ${port}`);
      return replica.port;
    },
    kill(port) {
      killed.add(port);
      nodes.find((n) => n.port === port)?.process.kill('SIGKILL');
    },
    async stop() {
      for (const n of alive()) n.process.kill('SIGKILL');
      await Promise.all(
        nodes.map((n) => (n.process.exitCode === null && n.process.signalCode === null ? new Promise((r) => n.process.once('exit', r)) : null)),
      );
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}

/** Joins the started nodes with `redis-cli --cluster create` and waits until every node says ok, every replica attached. */
async function join(nodes: ClusterNode[], masters: number, replicas: number): Promise<void> {
  const answering = async () => {
    for (const n of nodes) if ((await ask(n.port, (r) => r.ping()).catch(() => '')) !== 'PONG') return false;
    return true;
  };
  await until(answering, (ok) => ok, 'the cluster nodes to answer', 10_000);
  const created = spawnSync(
    'redis-cli',
    ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
    { encoding: 'utf8', timeout: 60_000 },
  );
  if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
  const ready = async () => {
    for (const n of nodes) {
      const info = await ask(n.port, (r) => r.call('CLUSTER', 'INFO') as Promise<string>).catch(() => '');
      if (!info.includes('cluster_state:ok')) return false;
    }
    // every replica attached: a failover has somewhere to go
    const all = await clusterNodes(nodes[0].port);
    return all.filter((n) => n.flags.includes('slave')).length === masters * replicas;
  };
  await until(ready, (ok) => ok, 'the cluster to be ok on every node', 30_000);
}
