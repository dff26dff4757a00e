/** A value pair: significand × 10^orderOfMagnitude. */
export interface ValuePair {
  orderOfMagnitude: number;
  significand: number;
}

/** The four limits of a threshold (the SDK's Threshold); a null limit is not checked. */
export interface Limits {
  criticallyLow: ValuePair | null;
  low: ValuePair | null;
  high: ValuePair | null;
  criticallyHigh: ValuePair | null;
}

/** Issue levels: 0 in range, 1 serious (beyond low or high), 2 critical (beyond criticallyLow or criticallyHigh). */
export type Level = 0 | 1 | 2;

/** -1, 0 or 1 as `a` is below, equal to or above `b`. Equal exponents (the usual case) compare exactly. */
export function compare(a: ValuePair, b: ValuePair): number {
  if (a.orderOfMagnitude === b.orderOfMagnitude) return Math.sign(a.significand - b.significand);
  // scale both to the smaller exponent; exact while the scaled significand stays below 2^53
  const m = Math.min(a.orderOfMagnitude, b.orderOfMagnitude);
  const da = a.orderOfMagnitude - m;
  const db = b.orderOfMagnitude - m;
  if (da <= 15 && db <= 15) {
    const x = a.significand * 10 ** da;
    const y = b.significand * 10 ** db;
    if (Number.isSafeInteger(x) && Number.isSafeInteger(y)) return Math.sign(x - y);
  }
  return Math.sign(a.significand * 10 ** a.orderOfMagnitude - b.significand * 10 ** b.orderOfMagnitude);
}

/** The level of `value` against `limits`: a value on a limit is inside it. */
export function levelOf(limits: Limits, value: ValuePair): Level {
  if ((limits.criticallyLow && compare(value, limits.criticallyLow) < 0) || (limits.criticallyHigh && compare(value, limits.criticallyHigh) > 0)) return 2;
  if ((limits.low && compare(value, limits.low) < 0) || (limits.high && compare(value, limits.high) > 0)) return 1;
  return 0;
}

/** Whether `value` lies below the low or the criticallyLow limit (a crossing on the low side). */
export const belowLow = (limits: Limits, value: ValuePair): boolean =>
  Boolean((limits.low && compare(value, limits.low) < 0) || (limits.criticallyLow && compare(value, limits.criticallyLow) < 0));

/** Whether any limit is set. */
export const hasLimit = (l: Limits): boolean => l.criticallyLow !== null || l.low !== null || l.high !== null || l.criticallyHigh !== null;

/** A stored limit (jsonb, where JSON null and SQL null both mean none). */
export const storedLimit = (v: unknown): ValuePair | null => (v && typeof v === 'object' ? (v as ValuePair) : null);

/**
 * A measurement's `performance` (the SDK's Measurement): -1 not compared (no limit applies), else its
 * level against the limits that apply: 0 within, 1 beyond low or high, 2 beyond a critical limit.
 */
export const performanceOf = (limits: Limits | null | undefined, value: ValuePair): -1 | Level => (limits && hasLimit(limits) ? levelOf(limits, value) : -1);
