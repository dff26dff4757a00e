/**
 * Which failures of a device job are worth waiting out. A job whose store is away (PostgreSQL down or
 * restarting, the monitoring core unreachable or misrouted, Redis reconnecting) is delayed and run again
 * for as long as it takes: the device was answered 200 or 202 and its data must not be dropped. Anything
 * else (a value PostgreSQL refuses, a bug of ours) would fail the same way every time: it gets a few
 * attempts and then fails for good, visibly.
 */

export { isTransient, StoreUnavailableError } from '../app/transient.ts';

/** Delay before a transient failure's next run: doubles from `baseMs` with each one in a row, capped, with jitter. */
export function transientDelayMs(inARow: number, baseMs = 250, capMs = 5000): number {
  const exp = Math.min(capMs, baseMs * 2 ** Math.max(0, Math.min(inARow - 1, 20)));
  return Math.round(exp * (0.75 + Math.random() * 0.5));
}
