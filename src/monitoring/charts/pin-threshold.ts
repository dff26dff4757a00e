import type { Queryable } from '../../app/db.ts';
import { pinThresholdsOf } from '../thresholds/store.ts';

type ValuePair = { orderOfMagnitude: number; significand: number };

/** The SDK's MeasurementThreshold: a pin's own limits for one quantity. */
export interface PinThreshold {
  hashId: string;
  pinHashId: string;
  criticallyLow: ValuePair | null;
  low: ValuePair | null;
  high: ValuePair | null;
  criticallyHigh: ValuePair | null;
}

/** Key of a (pin, quantity) pair in pinThresholdOf's answer. */
export const pairKey = (pinId: number, quantityId: number): string => `${pinId}:${quantityId}`;

/**
 * The threshold each chart series shows, per (pin, quantity) pair keyed by pairKey: the pin's own
 * measurement threshold (the SDK's chart model wants a MeasurementThreshold, which has a hashId). A pair
 * that only has its quantity's defaults is absent, answered `pinThreshold: null`; the series' quantity
 * carries those defaults.
 */
export async function pinThresholdOf(
  db: Queryable,
  environmentId: number,
  pairs: { pinId: number; quantityId: number }[],
): Promise<Map<string, Omit<PinThreshold, 'pinHashId'>>> {
  const out = new Map<string, Omit<PinThreshold, 'pinHashId'>>();
  for (const [key, t] of await pinThresholdsOf(db, environmentId, pairs)) {
    if (t?.hashId) out.set(key, { hashId: t.hashId, criticallyLow: t.criticallyLow, low: t.low, high: t.high, criticallyHigh: t.criticallyHigh });
  }
  return out;
}
