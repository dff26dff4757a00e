// The kernel's configuration: the `Config` every part of the service reads, and the kernel's own settings (processes,
// stores, keys). Each other area declares its settings beside the module that uses them (src/<area>/settings.ts) and
// merges them into `Config` (`declare module '../app/config.ts'`); the composition root (src/settings.ts) lists every
// group and loads them (`loadConfig`). Nothing else reads process.env.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { CustomSetting, IntSetting, PathSetting, Settings, SettingsOf } from './settings.ts';

export type Role = 'all' | 'api' | 'gateway' | 'worker';
const ROLES: Role[] = ['all', 'api', 'gateway', 'worker'];

/** The roles this process runs (`all` stands for api, gateway and worker); the CLI's first argument comes as ROLE. */
export const ROLE = {
  kind: 'custom',
  env: 'ROLE',
  accepts: 'one or more of `all`, `api`, `gateway`, `worker`, comma-separated',
  defaultText: '`all`',
  description: '`all`, or a comma-separated list of `api`, `gateway`, `worker` (also the first CLI argument)',
  parse(raw: string | undefined): Role[] {
    const roles = (raw ?? 'all').split(',').map((r) => r.trim()) as Role[];
    const unknown = roles.filter((r) => !ROLES.includes(r));
    if (unknown.length > 0) throw new Error(`ROLE must be one or more of ${ROLES.join(', ')} (comma-separated), got "${unknown.join(',')}"`);
    return roles;
  },
} as const satisfies CustomSetting<Role[]>;

export const DATA_DIR = {
  kind: 'path',
  env: 'DATA_DIR',
  default: './data',
  description: 'embedded database, private Redis data, the generated secret key',
} as const satisfies PathSetting;

export const API_PORT = {
  kind: 'int',
  env: 'API_PORT',
  default: 8080,
  min: 0,
  max: 65_535,
  description: 'REST API (HTTP; put TLS in front). Every role also answers `/health` and `/metrics` here',
} as const satisfies IntSetting;

/** REDIS_CLUSTER_NODES: host:port,host:port,... (an IPv6 host in brackets). */
function clusterNodes(raw: string | undefined): { host: string; port: number }[] {
  return (raw ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '')
    .map((node) => {
      const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(node);
      if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) throw new Error(`REDIS_CLUSTER_NODES must be host:port,host:port,..., got "${node}"`);
      return { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) };
    });
}

/** SECRET_KEY, or the key generated once into DATA_DIR/secret.key. */
function secretKey(raw: string | undefined, dataDir: string): Buffer {
  if (raw !== undefined) {
    if (!/^[0-9a-fA-F]{64}$/.test(raw)) throw new Error('SECRET_KEY must be 64 hex digits');
    return Buffer.from(raw, 'hex');
  }
  const file = path.join(dataDir, 'secret.key');
  if (existsSync(file)) return Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, key.toString('hex'), { mode: 0o600 });
  return key;
}

/** The kernel's settings: the roles, the stores, the API's address, logging and keys. */
export const KERNEL_SETTINGS = {
  roles: ROLE,
  databaseUrl: {
    kind: 'str',
    env: 'DATABASE_URL',
    accepts: 'a PostgreSQL URL',
    default: null,
    defaultText: 'unset → embedded PostgreSQL in `DATA_DIR`',
    description: 'PostgreSQL connection string (unset: the service runs a PostgreSQL server of its own, see *Embedded default* below)',
  },
  databaseReadUrl: {
    kind: 'str',
    env: 'DATABASE_READ_URL',
    accepts: 'a PostgreSQL URL',
    default: null,
    defaultText: 'unset → the primary (`DATABASE_URL`)',
    description:
      "PostgreSQL connection string of a streaming replica of `DATABASE_URL`: measurement find, chart series and analytics read there; a write shows there after the replica's lag (see [decisions](decisions.md), *A read replica*)",
  },
  databaseIdleTimeoutMs: {
    kind: 'int',
    env: 'DATABASE_IDLE_TIMEOUT_MS',
    default: 10_000,
    min: 100,
    max: 2 ** 31,
    description: 'a pooled database connection idle this long is closed, and opened again when needed',
  },
  redisUrl: { kind: 'str', env: 'REDIS_URL', accepts: 'a Redis URL', default: 'redis://127.0.0.1:6379', description: 'Redis for queues, caches, counters' },
  redisClusterNodes: {
    kind: 'custom',
    env: 'REDIS_CLUSTER_NODES',
    accepts: '`host:port,host:port,...`',
    defaultText: 'unset → the single Redis at REDIS_URL',
    description:
      'host:port,host:port,... of a Redis Cluster (some of its masters or replicas; the rest are found): queues, caches, counters, locks and pub/sub all run on it and REDIS_URL is not used ([fleet](fleet.md#redis-cluster))',
    parse: clusterNodes,
  },
  dataDir: DATA_DIR,
  apiHost: { kind: 'str', env: 'API_HOST', accepts: 'an IP address', default: '0.0.0.0', description: 'address the REST API binds to' },
  apiPort: API_PORT,
  logLevel: {
    kind: 'enum',
    env: 'LOG_LEVEL',
    default: 'info',
    values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    description:
      'pino level; the log is JSON lines on stdout. A Redis outage is one `warn` line per process ("redis unavailable…") and one `info` line when it is back ("redis available again"), however many connections retry',
  },
  secretKey: {
    kind: 'custom',
    env: 'SECRET_KEY',
    accepts: '64 hex digits',
    defaultText: 'unset → generated once into `DATA_DIR/secret.key`',
    description: '64 hex digits; signs tokens (HS256) and encrypts device keys at rest (AES-256-GCM). Every process of a deployment needs the same one',
    parse: (raw, ctx): Buffer => secretKey(raw, ctx.get(DATA_DIR)),
  },
  internalToken: {
    kind: 'str',
    env: 'INTERNAL_TOKEN',
    default: '',
    defaultText: 'derived from `SECRET_KEY`',
    description: 'bearer token workers present to the monitoring core',
  },
  shutdownGraceMs: { kind: 'int', env: 'SHUTDOWN_GRACE_MS', default: 10_000, min: 0, max: 600_000, description: 'how long SIGTERM waits for in-flight jobs' },
  queueName: { kind: 'str', env: 'QUEUE_NAME', accepts: 'a BullMQ queue name', default: 'device-events', description: 'BullMQ queue name' },
  queueShards: {
    kind: 'int',
    env: 'QUEUE_SHARDS',
    default: 1,
    min: 1,
    max: 1024,
    description:
      "device queues the device jobs are spread over, by device (one device's jobs stay on one, in order); every worker takes from all of them. On a Redis Cluster each is a hash slot of its own, so more shards spread the queue over more masters. Lowering it strands the jobs in the dropped shards: drain them first",
  },
} as const satisfies Settings;

/**
 * The one validated configuration object, inferred from the declarations: the kernel's here, every other area's merged
 * in by its settings file (`interface Config extends SettingsOf<typeof …>` in `declare module '../app/config.ts'`).
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- its members come from the declarations
export interface Config extends SettingsOf<typeof KERNEL_SETTINGS> {}
