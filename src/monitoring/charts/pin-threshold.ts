import type { Queryable } from '../../app/db.ts';

/** The SDK's MeasurementThreshold: a pin's limits for one quantity. */
export interface PinThreshold {
  hashId: string;
  pinHashId: string;
  criticallyLow: { orderOfMagnitude: number; significand: number } | null;
  low: { orderOfMagnitude: number; significand: number } | null;
  high: { orderOfMagnitude: number; significand: number } | null;
  criticallyHigh: { orderOfMagnitude: number; significand: number } | null;
}

/** Key of a (pin, quantity) pair in pinThresholdOf's answer. */
export const pairKey = (pinId: number, quantityId: number): string => `${pinId}:${quantityId}`;

/**
 * The threshold each chart series shows: per (pin, quantity) pair, keyed by pairKey; a pair that is
 * absent has none (answered as `pinThreshold: null`, which the SDK's chart model allows).
 *
 * The one place charts look thresholds up. Pin thresholds are being built by the thresholds work in
 * parallel (its table is not on main yet); that work fills this in, until then no pair has one.
 */
export async function pinThresholdOf(_db: Queryable, _environmentId: number, _pairs: { pinId: number; quantityId: number }[]): Promise<Map<string, PinThreshold>> {
  return new Map();
}
