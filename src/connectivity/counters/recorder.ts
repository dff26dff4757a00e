import type { AppContext, AppStores } from '../../app/context.ts';
import type { Redis } from '../../app/redis.ts';
import { shardOf, shardTag, tagged } from '../../app/redis-keys.ts';

/**
 * The counters the service itself keeps for every device, by key (the field name in the hourly
 * Redis hash), with the name the counters route shows for them.
 */
export const BUILTIN_COUNTERS = {
  contacts: 'Authenticated contacts',
  handshakeFailures: 'Failed handshakes of a known identity',
  refusedContacts: 'Contacts refused (device type deleted)',
  handlerFailures: 'Event handler failures',
  reports: 'Reports stored (parseReport)',
  reportFailures: 'Reports that failed to parse',
  commandsSent: 'Commands marked as sent',
  reportingCounter: 'increaseReportingCounter calls',
  reportsLate: 'Reports late',
} as const;
export type BuiltinCounterKey = keyof typeof BUILTIN_COUNTERS;

/** Hashes live this long in Redis; the flusher has copied them to PostgreSQL long before. */
export const COUNTER_TTL_SECONDS = 3 * 24 * 3600;
/**
 * Counter keys are spread over COUNTER_SHARDS hash tags by device (src/app/redis-keys.ts): a batch of
 * increments is one script call per shard, which on a Redis Cluster touches one slot, and the shards spread
 * over the masters. Never change it on a running deployment: hours not yet flushed would be left behind.
 */
export const COUNTER_SHARDS = 16;
type KeyConfig = Pick<AppContext['config'], 'queueName'>;
const counterShardOf = (deviceHashId: string) => shardOf(deviceHashId, COUNTER_SHARDS);
const counterTag = (config: KeyConfig, shard: number) => shardTag(config, 'counters', shard);
/**
 * The set of `<deviceHashId>:<hour>` hashes of one shard written since the last flush: one per deployment,
 * named after its queue (every gateway and worker of a deployment shares QUEUE_NAME), so two
 * deployments on one Redis never flush each other's counters into the wrong database.
 */
export const dirtySetOf = (config: KeyConfig, shard: number) => tagged(counterTag(config, shard), 'dirty');
/** The set that marks a device's hours dirty. */
export const dirtySetOfDevice = (config: KeyConfig, deviceHashId: string) => dirtySetOf(config, counterShardOf(deviceHashId));

/** `2026-11-22T01`: the hour a counter increment belongs to (UTC). */
export function hourOf(at: Date): string {
  // every count of a report asks for the same hour: its text is made once an hour, not once a count
  const hour = Math.floor(at.getTime() / 3_600_000);
  if (hour !== lastHour.n) lastHour = { n: hour, text: at.toISOString().slice(0, 13) };
  return lastHour.text;
}
let lastHour = { n: NaN, text: '' };
/** The hash of one device's counters in one hour (in the device's shard). */
export const counterHashKey = (config: KeyConfig, deviceHashId: string, hour: string) =>
  tagged(counterTag(config, counterShardOf(deviceHashId)), deviceHashId, hour);

const MAX_DELAY_MS = 50;
const MAX_ENTRIES = 1000;

/**
 * One round trip and one command per shard and batch, however many devices it holds (a pipeline of
 * HINCRBYs costs the client a command object per increment). KEYS: the shard's dirty set, then the
 * hashes (all of one shard: one hash slot). ARGV: ttl, then per hash `<deviceHashId>:<hour>`, n, and
 * n pairs field, increment.
 */
const INCREMENT_SCRIPT = `
local ttl = tonumber(ARGV[1])
local i = 2
for k = 2, #KEYS do
  local key = KEYS[k]
  local n = tonumber(ARGV[i + 1])
  for j = 1, n do
    redis.call('HINCRBY', key, ARGV[i + 2 * j], ARGV[i + 2 * j + 1])
  end
  redis.call('EXPIRE', key, ttl)
  redis.call('SADD', KEYS[1], ARGV[i])
  i = i + 2 + 2 * n
end
return 0`;

/**
 * Collects increments in memory and writes them as one Redis script call every MAX_DELAY_MS (or
 * sooner when many devices are counted): a device contact costs a Map update, not a round trip.
 * Each hash gets its TTL and is marked dirty for the flusher in the same call, after its increments.
 */
export class CounterRecorder {
  private pending = new Map<string, Map<string, number>>();
  /** the shard of each member of `pending` */
  private shardOf = new Map<string, number>();
  private entries = 0;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private readonly redis: Redis;
  private readonly config: KeyConfig;
  private readonly onError: (err: Error) => void;

  constructor(redis: Redis, config: KeyConfig, onError: (err: Error) => void) {
    this.redis = redis;
    this.config = config;
    this.onError = onError;
  }

  count(deviceHashId: string, key: string, at: Date = new Date(), by = 1): void {
    if (Number.isNaN(at.getTime())) return;
    const member = `${deviceHashId}:${hourOf(at)}`;
    let fields = this.pending.get(member);
    if (!fields) {
      fields = new Map();
      this.pending.set(member, fields);
      this.shardOf.set(member, counterShardOf(deviceHashId));
    }
    if (!fields.has(key)) this.entries++;
    fields.set(key, (fields.get(key) ?? 0) + by);
    if (this.entries >= MAX_ENTRIES) this.flush();
    else if (!this.timer) this.timer = setTimeout(() => this.flush(), MAX_DELAY_MS);
  }

  private flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.pending.size === 0) return this.flushing;
    const batch = this.pending;
    const shards = this.shardOf;
    this.pending = new Map();
    this.shardOf = new Map();
    this.entries = 0;
    const calls = new Map<number, { keys: string[]; args: (string | number)[] }>();
    for (const [member, fields] of batch) {
      const shard = shards.get(member)!;
      let call = calls.get(shard);
      if (!call) calls.set(shard, (call = { keys: [dirtySetOf(this.config, shard)], args: [COUNTER_TTL_SECONDS] }));
      const colon = member.lastIndexOf(':');
      call.keys.push(counterHashKey(this.config, member.slice(0, colon), member.slice(colon + 1)));
      call.args.push(member, fields.size);
      for (const [field, by] of fields) call.args.push(field, by);
    }
    const written = Promise.all([...calls.values()].map(({ keys, args }) => this.redis.eval(INCREMENT_SCRIPT, keys.length, ...keys, ...args))).then(
      () => undefined,
      (err: Error) => this.onError(err),
    );
    this.flushing = Promise.all([this.flushing, written]).then(() => undefined);
    return this.flushing;
  }

  /** Writes everything counted so far. */
  drain(): Promise<void> {
    return this.flush();
  }
}

declare module '../../app/context.ts' {
  interface AppContext {
    /** this context's connectivity counter recorder, on its Redis connection (src/connectivity/counters/recorder.ts) */
    counters: CounterRecorder;
  }
}

/** The recorder of a new context (src/context.ts). */
export function createCounterRecorder(stores: Pick<AppStores, 'redis' | 'log' | 'config'>): CounterRecorder {
  return new CounterRecorder(stores.redis, stores.config, (err) => stores.log.warn({ err: err.message }, 'connectivity counters could not be written'));
}

/** The context's recorder. */
export const counterRecorder = (ctx: Pick<AppContext, 'counters'>): CounterRecorder => ctx.counters;

/**
 * Counts one event of a device (a contact, a handshake failure, ...) under `key`, in the hour of
 * `at`. Never waits and never throws: listeners (HTTPS, CoAP, webhooks) call it on their hot path.
 */
export function countDeviceEvent(ctx: Pick<AppContext, 'counters'>, deviceHashId: string, key: BuiltinCounterKey | (string & {}), at?: Date): void {
  counterRecorder(ctx).count(deviceHashId, key, at);
}
