// Bounds on supplier code and on everything it produces, one object for the process. The values
// come from the configuration (SANDBOX_* and ACTIVITY_* variables, declared in ./settings.ts and set
// at start by configureSupplierCodeLimits); each bound that is hit is named in the run's activity.

import { SUPPLIER_CODE_SETTINGS, type SupplierCodeLimits } from './settings.ts';

export type { SupplierCodeLimits };

/** The declared defaults (./settings.ts), for a process or test that configures none. */
export const DEFAULT_SUPPLIER_CODE_LIMITS: Readonly<SupplierCodeLimits> = Object.freeze(
  Object.fromEntries(Object.entries(SUPPLIER_CODE_SETTINGS).map(([key, s]) => [key, s.default])) as SupplierCodeLimits,
);

let current: SupplierCodeLimits = DEFAULT_SUPPLIER_CODE_LIMITS;

/** Sets this process's limits (from the configuration, when its context is created). */
export function configureSupplierCodeLimits(next: Partial<SupplierCodeLimits>): void {
  current = { ...DEFAULT_SUPPLIER_CODE_LIMITS, ...next };
}

export function supplierCodeLimits(): SupplierCodeLimits {
  return current;
}
