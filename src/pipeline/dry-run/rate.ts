import type { AppContext } from '../../app/context.ts';
import { RateLimitError } from '../../app/errors.ts';

// One token bucket per environment, in Redis so every API process of a deployment draws on the same one. The
// clock is Redis's own (TIME), so processes with skewed clocks neither refill nor drain a bucket twice.
// Keyed under QUEUE_NAME like the login counters, so deployments (and test runs) sharing a Redis keep apart.
// Answers 0 (a token taken) or the milliseconds until the next token.
const TAKE_TOKEN = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local rate = tonumber(ARGV[1]) / 60000
local burst = tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1]) or burst
local at = tonumber(b[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = math.ceil((1 - tokens) / rate) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate) + 1000)
return wait`;

/** Takes one dry run from the environment's bucket (DRY_RUNS_PER_MINUTE, DRY_RUN_BURST), or throws the 429. */
export async function takeDryRunToken(ctx: Pick<AppContext, 'redis' | 'config'>, environmentHashId: string): Promise<void> {
  const waitMs = Number(
    await ctx.redis.eval(TAKE_TOKEN, 1, `${ctx.config.queueName}:dry-run:${environmentHashId}`, ctx.config.dryRunsPerMinute, ctx.config.dryRunBurst),
  );
  if (waitMs > 0) {
    const seconds = Math.max(1, Math.ceil(waitMs / 1000));
    throw new RateLimitError(
      `more than ${ctx.config.dryRunBurst} dry runs at once or ${ctx.config.dryRunsPerMinute} a minute for this environment (DRY_RUN_BURST, DRY_RUNS_PER_MINUTE): try again in ${seconds} s`,
      seconds,
    );
  }
}
