import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Queue } from 'bullmq';
import { Cluster, Redis as SingleRedis } from 'ioredis';
import type { Config } from './config.ts';
import type { Logger } from './logger.ts';

/** A connection to the deployment's Redis: one server (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES). */
export type Redis = SingleRedis | Cluster;

/**
 * Whether Redis is reachable, as one process sees it through all of its connections. A connection
 * that fails is down until it is ready again; an outage is the time some connection is down. Its log
 * is one warn line when it begins and one info line when the last connection is back, however many
 * connections retry how often in between (ioredis and BullMQ report every failed attempt).
 */
class RedisOutage {
  readonly #log: Logger;
  readonly #down = new Set<Redis>();
  #since = 0;
  #failedAttempts = 0;

  constructor(log: Logger) {
    this.#log = log;
  }

  watch(conn: Redis): void {
    // the listener also keeps ioredis from printing "[ioredis] Unhandled error event" with a stack trace
    conn.on('error', (err: Error) => this.#failed(conn, err));
    conn.on('ready', () => this.#back(conn));
    // closed for good (quit, or no more retries): it no longer holds an outage open
    conn.on('end', () => {
      if (this.#down.delete(conn) && this.#down.size === 0) this.#since = 0;
    });
    if (conn instanceof Cluster) {
      // a cluster stays ready while one master is away: its nodes' failures come as 'node error', and it counts as
      // whole again once, after a slots refresh, every master connection it holds answers
      conn.on('node error', (err: Error) => this.#failed(conn, err));
      conn.on('refresh', () => {
        if (!this.#down.has(conn)) return;
        Promise.all(conn.nodes('master').map((node) => node.ping())).then(
          () => this.#back(conn),
          () => undefined,
        );
      });
    }
  }

  #failed(conn: Redis, err: Error): void {
    this.#failedAttempts++;
    if (this.#since === 0) {
      this.#since = Date.now();
      this.#failedAttempts = 1;
      this.#log.warn({ err: err.message }, 'redis unavailable; every connection keeps retrying (one line per outage)');
    }
    this.#down.add(conn);
  }

  #back(conn: Redis): void {
    if (!this.#down.delete(conn) || this.#down.size > 0 || this.#since === 0) return;
    this.#log.info({ downMs: Date.now() - this.#since, failedAttempts: this.#failedAttempts }, 'redis available again');
    this.#since = 0;
  }
}

// one outage state per process: its connections are all made with the process's logger
const outages = new WeakMap<Logger, RedisOutage>();

function outageOf(log: Logger): RedisOutage {
  let outage = outages.get(log);
  if (!outage) {
    outage = new RedisOutage(log);
    outages.set(log, outage);
  }
  return outage;
}

/** Reports a connection's failures to its process's outage state, and those of the connections duplicated from it (BullMQ's). */
function watched<C extends Redis>(conn: C, outage: RedisOutage): C {
  outage.watch(conn);
  const duplicate = conn.duplicate.bind(conn) as (...args: unknown[]) => C;
  (conn as unknown as { duplicate: (...args: unknown[]) => C }).duplicate = (...args: unknown[]) => watched(duplicate(...args), outage);
  return conn;
}

/** How a process reaches Redis: REDIS_CLUSTER_NODES when set, else REDIS_URL. */
export type RedisConfig = Pick<Config, 'redisUrl' | 'redisClusterNodes'>;

/** While a master fails over, a command for its slots waits this long between tries (ioredis' retryDelayOnFailover and friends). */
const CLUSTER_RETRY_DELAY_MS = 200;

/**
 * A Redis connection as BullMQ wants it (no per-command retry limit): to the single Redis at REDIS_URL or,
 * with REDIS_CLUSTER_NODES, to the Redis Cluster those nodes belong to (ioredis finds the others and follows
 * slots that move or fail over). Its failures go to the process's outage log (one warn line per outage, one
 * info line when Redis is back), not per attempt.
 */
export function createRedis(config: RedisConfig, log: Logger): Redis {
  if (config.redisClusterNodes.length === 0) {
    return watched(new SingleRedis(config.redisUrl, { maxRetriesPerRequest: null, enableReadyCheck: true, lazyConnect: false }), outageOf(log));
  }
  return watched(
    new Cluster(config.redisClusterNodes, {
      redisOptions: { maxRetriesPerRequest: null, enableReadyCheck: true },
      // a master that fails over is unreachable for a few seconds: commands wait for its replica, they do not fail
      retryDelayOnFailover: CLUSTER_RETRY_DELAY_MS,
      retryDelayOnClusterDown: CLUSTER_RETRY_DELAY_MS,
      retryDelayOnTryAgain: CLUSTER_RETRY_DELAY_MS,
      maxRedirections: 64,
      clusterRetryStrategy: (times) => Math.min(100 * times, 2000),
      slotsRefreshInterval: 2000,
    }),
    outageOf(log),
  );
}

/** Whether the deployment's Redis is a Redis Cluster (keys combined by a command must then share a hash tag: src/app/redis-keys.ts). */
export const isCluster = (config: RedisConfig) => config.redisClusterNodes.length > 0;

const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNABORTED',
]);

/** An error that only says Redis could not be reached (the outage log covers it). */
export function isRedisConnectionError(err: Error & { code?: unknown }): boolean {
  if (typeof err.code === 'string' && CONNECTION_ERROR_CODES.has(err.code)) return true;
  return /Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET|ETIMEDOUT|max retries per request/i.test(err.message);
}

/**
 * A BullMQ worker whose fetch, completion or failure write meets a connection error (a Redis Cluster master that
 * died, CLUSTERDOWN until its replica is promoted) tries again after this long; BullMQ's own pause is 15 s, which
 * left a queue shard without a worker for 15 s or more after a failover (reports answered 202 meanwhile).
 */
export const WORKER_RUN_RETRY_MS = 1000;

/**
 * The 'error' listener of a BullMQ Queue or Worker: BullMQ passes on every failed attempt of its
 * connections, which the outage log already tells once; anything else is logged at error level.
 * (A Queue without one prints each attempt's stack trace to stderr.)
 */
export function bullmqErrorLogger(log: Logger, message: string): (err: Error) => void {
  return (err) => {
    if (!isRedisConnectionError(err)) log.error({ err: err.message }, message);
  };
}

/**
 * A context's producer on one BullMQ queue: `open` runs at the first job added (on the context's own connection: a
 * producer needs no blocking one), and closeContext closes it.
 */
export class QueueProducer<T> {
  #queue: Queue<T> | null = null;
  readonly #open: () => Queue<T>;

  constructor(open: () => Queue<T>) {
    this.#open = open;
  }

  get queue(): Queue<T> {
    return (this.#queue ??= this.#open());
  }

  async close(): Promise<void> {
    const queue = this.#queue;
    this.#queue = null;
    await queue?.close();
  }
}

async function answers(url: string): Promise<boolean> {
  const probe = new SingleRedis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

/**
 * Makes sure a Redis answers at `url`. When none does, the URL names this machine and a
 * `redis-server` binary exists, a private one is spawned (append-only, data in `dataDir/redis`).
 */
export async function ensureRedis(url: string, dataDir: string, log: Logger): Promise<{ stop(): void }> {
  if (await answers(url)) return { stop: () => undefined };
  const u = new URL(url);
  const local = ['127.0.0.1', 'localhost', '::1', '[::1]'].includes(u.hostname);
  const hasBinary = spawnSync('redis-server', ['--version']).status === 0;
  if (!local || !hasBinary) {
    throw new Error(
      `No Redis answers at ${url}. Start one (e.g. "apt-get install redis-server && redis-server --daemonize yes") or set REDIS_URL to a Redis that runs.`,
    );
  }
  const dir = path.join(dataDir, 'redis');
  mkdirSync(dir, { recursive: true });
  const child = spawn('redis-server', ['--port', u.port || '6379', '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', ''], {
    stdio: 'ignore',
  });
  for (let i = 0; i < 50; i++) {
    if (await answers(url)) {
      log.info({ url, dir }, 'started a private redis-server');
      return { stop: () => child.kill('SIGTERM') };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`Started redis-server for ${url} but it did not answer within 5 s.`);
}
