import type { AppContext } from '../../app/context.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { BUILTIN_COUNTERS, COUNTER_SHARDS, COUNTER_TTL_SECONDS, counterHashKey, dirtySetOf, hourOf } from './recorder.ts';

type Ctx = Pick<AppContext, 'db' | 'redis' | 'log' | 'config'>;

const HOUR_MS = 3600_000;
/** The longest range one counters request may cover: 31 days of hours. */
export const MAX_RANGE_HOURS = 744;
/** Hours older than this are pruned from PostgreSQL. */
export const COUNTER_RETENTION_DAYS = 400;
const FLUSH_CHUNK = 500;

const hourStart = (hour: string) => new Date(`${hour}:00:00.000Z`);

/**
 * Copies the hourly hashes written since the last flush from Redis to `device_counter_hour`, shard by shard.
 * Values are absolute (the Redis hash holds the hour's total), so two flushers, a retried flush
 * or a late one never count twice. Returns how many hashes were copied.
 */
export async function flushCounters(ctx: Ctx, maxHashes = 20_000): Promise<number> {
  let copied = 0;
  for (let shard = 0; shard < COUNTER_SHARDS && copied < maxHashes; shard++) copied += await flushShard(ctx, shard, maxHashes - copied);
  return copied;
}

async function flushShard(ctx: Ctx, shard: number, maxHashes: number): Promise<number> {
  const dirty = dirtySetOf(ctx.config, shard);
  let copied = 0;
  while (copied < maxHashes) {
    const members = (await ctx.redis.spop(dirty, FLUSH_CHUNK)) as string[];
    if (members.length === 0) break;
    try {
      // one shard's hashes share a hash slot: one pipeline, on a Redis Cluster too
      const pipeline = ctx.redis.pipeline();
      const parsed = members.map((m) => {
        const colon = m.lastIndexOf(':');
        return { deviceHashId: m.slice(0, colon), hour: m.slice(colon + 1) };
      });
      for (const p of parsed) pipeline.hgetall(counterHashKey(ctx.config, p.deviceHashId, p.hour));
      const results = (await pipeline.exec()) ?? [];
      const hashIds: string[] = [],
        hours: Date[] = [],
        keys: string[] = [],
        values: number[] = [];
      results.forEach(([err, hash], i) => {
        if (err) throw err;
        for (const [key, value] of Object.entries(hash as Record<string, string>)) {
          hashIds.push(parsed[i].deviceHashId);
          hours.push(hourStart(parsed[i].hour));
          keys.push(key);
          values.push(Number(value));
        }
      });
      if (hashIds.length > 0) {
        // a deleted device's counters find no row to join and are dropped
        await ctx.db.query(
          `INSERT INTO device_counter_hour (device_id, hour, key, value)
           SELECT d.id, v.hour, v.key, v.value
             FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::bigint[]) AS v(hash_id, hour, key, value)
             JOIN device d ON d.hash_id = v.hash_id
           ON CONFLICT (device_id, hour, key) DO UPDATE SET value = GREATEST(device_counter_hour.value, EXCLUDED.value)`,
          [hashIds, hours, keys, values],
        );
      }
    } catch (err) {
      // put them back: the next flush tries again
      await ctx.redis.sadd(dirty, ...members).catch(() => undefined);
      throw err;
    }
    copied += members.length;
  }
  return copied;
}

/** Deletes the hours older than COUNTER_RETENTION_DAYS. Returns how many rows went. */
export async function pruneCounters(ctx: Pick<AppContext, 'db'>, now = new Date()): Promise<number> {
  const { rowCount } = await ctx.db.query('DELETE FROM device_counter_hour WHERE hour < $1', [new Date(now.getTime() - COUNTER_RETENTION_DAYS * 24 * HOUR_MS)]);
  return rowCount ?? 0;
}

export interface CounterFlusher {
  stop(): Promise<void>;
}

/** Flushes every `intervalMs` and prunes once an hour (each worker runs one; they do not conflict). */
export function startCounterFlusher(ctx: Ctx, intervalMs = 15_000): CounterFlusher {
  let running: Promise<unknown> = Promise.resolve();
  let prunedAt = 0;
  const tick = () => {
    running = (async () => {
      await flushCounters(ctx);
      if (Date.now() - prunedAt > HOUR_MS) {
        prunedAt = Date.now();
        await pruneCounters(ctx);
      }
    })().catch((err: Error) => ctx.log.warn({ err: err.message }, 'connectivity counters flush failed; retried next time'));
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return {
    /** Stops the timer and flushes once more, so a deployment shut down whole leaves nothing only in Redis. */
    async stop() {
      clearInterval(timer);
      await running;
      await flushCounters(ctx).catch((err: Error) =>
        ctx.log.warn({ err: err.message }, 'connectivity counters: last flush failed; the next worker copies them'),
      );
    },
  };
}

export interface CounterEntry {
  /** a built-in counter's key (`contacts`, ...) or the hashId of one of the environment's counter keys */
  key: string;
  name: string;
  total: number;
  /** hours with a count, oldest first; `hour` is the start of the hour (UTC) */
  values: { hour: string; value: number }[];
}

/** Checks and normalises a counters range: `from` inclusive, `to` exclusive, at most MAX_RANGE_HOURS. */
export function counterRange(query: { from?: string; to?: string }, now = new Date()): { from: Date; to: Date } {
  const to = query.to ? new Date(query.to) : now;
  const from = query.from ? new Date(query.from) : new Date(to.getTime() - 24 * HOUR_MS);
  if (from.getTime() >= to.getTime()) throw new ParameterError('from must lie before to');
  if (to.getTime() - from.getTime() > MAX_RANGE_HOURS * HOUR_MS) {
    throw new ParameterError(`to may lie at most ${MAX_RANGE_HOURS} hours (31 days) after from`);
  }
  return { from, to };
}

/**
 * The counters of one device of the environment per key and hour for the hours overlapping
 * [from, to): PostgreSQL for what was flushed, Redis for the hours still there (the larger wins,
 * both being absolute). Every built-in counter and every live counter key of the environment
 * has an entry, with a zero total when nothing was counted.
 */
export async function readDeviceCounters(ctx: Ctx, environmentId: number, deviceHashId: string, range: { from: Date; to: Date }): Promise<CounterEntry[]> {
  const device = await ctx.db.query<{ id: number }>('SELECT id FROM device WHERE environment_id = $1 AND hash_id = $2', [environmentId, deviceHashId]);
  if (device.rows.length === 0) throw new NotFoundError('device', deviceHashId);
  const firstHour = Math.floor(range.from.getTime() / HOUR_MS) * HOUR_MS;

  const [stored, counterKeys] = await Promise.all([
    ctx.db.query<{ hour: Date; key: string; value: string }>(
      'SELECT hour, key, value FROM device_counter_hour WHERE device_id = $1 AND hour >= $2 AND hour < $3',
      [device.rows[0].id, new Date(firstHour), range.to],
    ),
    ctx.db.query<{ hash_id: string; name: string; deleted: boolean }>(
      'SELECT hash_id, name, deleted_at IS NOT NULL AS deleted FROM connectivity_counter_key WHERE environment_id = $1 ORDER BY id',
      [environmentId],
    ),
  ]);
  const values = new Map<string, Map<string, number>>(); // key → hour → value
  const put = (key: string, hour: string, value: number) => {
    let byHour = values.get(key);
    if (!byHour) values.set(key, (byHour = new Map()));
    byHour.set(hour, Math.max(byHour.get(hour) ?? 0, value));
  };
  for (const r of stored.rows) put(r.key, hourOf(r.hour), Number(r.value));

  // only the hours Redis can still hold
  const live: string[] = [];
  const oldestLive = Date.now() - COUNTER_TTL_SECONDS * 1000 - HOUR_MS;
  for (let t = Math.max(firstHour, Math.floor(oldestLive / HOUR_MS) * HOUR_MS); t < range.to.getTime(); t += HOUR_MS) live.push(hourOf(new Date(t)));
  if (live.length > 0) {
    const pipeline = ctx.redis.pipeline();
    for (const hour of live) pipeline.hgetall(counterHashKey(ctx.config, deviceHashId, hour));
    const results = (await pipeline.exec()) ?? [];
    results.forEach(([err, hash], i) => {
      if (err) throw err;
      for (const [key, value] of Object.entries(hash as Record<string, string>)) put(key, live[i], Number(value));
    });
  }

  const entry = (key: string, name: string): CounterEntry => {
    const byHour = [...(values.get(key) ?? new Map<string, number>())].filter(([, v]) => v > 0).sort(([a], [b]) => a.localeCompare(b));
    values.delete(key);
    return {
      key,
      name,
      total: byHour.reduce((sum, [, v]) => sum + v, 0),
      values: byHour.map(([hour, value]) => ({ hour: hourStart(hour).toISOString(), value })),
    };
  };
  const entries = Object.entries(BUILTIN_COUNTERS).map(([key, name]) => entry(key, name));
  for (const k of counterKeys.rows) {
    if (k.deleted) values.delete(k.hash_id);
    else entries.push(entry(k.hash_id, k.name));
  }
  // counted under a key this deployment does not list: shown under the key itself
  for (const key of [...values.keys()].sort()) entries.push(entry(key, key));
  return entries;
}
