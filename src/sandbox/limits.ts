// Bounds on supplier code and on everything it produces, one object for the process. The values
// come from the configuration (SANDBOX_* and ACTIVITY_* variables, set at start by
// configureSupplierCodeLimits); each bound that is hit is named in the run's activity.

import type { SupplierCodeLimits } from '../app/config.ts';

export type { SupplierCodeLimits };

export const DEFAULT_SUPPLIER_CODE_LIMITS: SupplierCodeLimits = {
  maxSourceChars: 1_000_000,
  compilesPerMinute: 60,
  compileTimeoutMs: 10_000,
  maxAnswerBytes: 65_536,
  maxResultBytes: 1_048_576,
  maxLogLines: 200,
  maxLogLineChars: 2000,
  maxCalls: 1000,
  maxCallBytes: 65_536,
  maxActivityBytes: 1_048_576,
};

let current: SupplierCodeLimits = DEFAULT_SUPPLIER_CODE_LIMITS;

/** Sets this process's limits (from the configuration, when its context is created). */
export function configureSupplierCodeLimits(next: Partial<SupplierCodeLimits>): void {
  current = { ...DEFAULT_SUPPLIER_CODE_LIMITS, ...next };
}

export function supplierCodeLimits(): SupplierCodeLimits {
  return current;
}
