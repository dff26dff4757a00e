import type { Clock } from '../../app/clock.ts';
import type { AppContext } from '../../app/context.ts';
import { RateLimitError } from '../../app/errors.ts';
import { liveStreamsKey } from '../../app/redis-keys.ts';

// An environment's open streams are counted over every API process: each holds a lease in one sorted set (member:
// the stream's id, score: when its lease ends, on Redis's clock, the one clock every process shares; a test passes a
// clock of its own as ARGV[4]). A stream renews its lease with each keepalive and gives it back when it ends; the lease of
// a process that died runs out by itself.
// Answers 1 (leased or renewed) or 0 (the environment holds `max` streams already).
const LEASE = `
local now = tonumber(ARGV[4])
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1`;

/** A lease lasts three keepalives: a stream whose process died stops counting within that. */
export const LEASE_MS = 45_000;

/** `clock`: whose time the leases run on. Default: Redis's (TIME), shared by every process. */
type LeaseContext = Pick<AppContext, 'redis' | 'config'> & { clock?: Clock };

/** Takes (or renews) stream `streamId`'s lease; false when the environment holds LIVE_LOG_STREAMS_PER_ENVIRONMENT streams already. */
export async function leaseStream(ctx: LeaseContext, environmentHashId: string, streamId: string): Promise<boolean> {
  const ok = await ctx.redis.eval(
    LEASE,
    1,
    liveStreamsKey(ctx.config, environmentHashId),
    streamId,
    ctx.config.liveLogStreamsPerEnvironment,
    LEASE_MS,
    ...(ctx.clock ? [ctx.clock.now()] : []),
  );
  return Number(ok) === 1;
}

/** Takes a new stream's lease, or throws the 429. */
export async function takeStreamLease(ctx: LeaseContext, environmentHashId: string, streamId: string): Promise<void> {
  if (await leaseStream(ctx, environmentHashId, streamId)) return;
  const max = ctx.config.liveLogStreamsPerEnvironment;
  throw new RateLimitError(`this environment has ${max} live log streams open already (LIVE_LOG_STREAMS_PER_ENVIRONMENT): close one or try again later`, 15);
}

/** Gives a stream's lease back. */
export async function releaseStream(ctx: LeaseContext, environmentHashId: string, streamId: string): Promise<void> {
  await ctx.redis.zrem(liveStreamsKey(ctx.config, environmentHashId), streamId);
}
