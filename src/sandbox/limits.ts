// Bounds on supplier code and on everything it produces. The values come from the configuration (SANDBOX_* and
// ACTIVITY_* variables, declared in ./settings.ts, read into `config.supplierCode`); whoever compiles or runs
// supplier code hands them in (compileUserCode's `limits`, the Sandbox's `limits`), so two contexts in one process
// may run with different bounds. No module state holds them. Each bound that is hit is named in the run's activity.

import { SUPPLIER_CODE_SETTINGS, type SupplierCodeLimits } from './settings.ts';

export type { SupplierCodeLimits };

/** The declared defaults (./settings.ts), for a caller (a test, a tool) that configures none. */
export const DEFAULT_SUPPLIER_CODE_LIMITS: Readonly<SupplierCodeLimits> = Object.freeze(
  Object.fromEntries(Object.entries(SUPPLIER_CODE_SETTINGS).map(([key, s]) => [key, s.default])) as SupplierCodeLimits,
);

/**
 * The hard ceiling on the length of one supplier source (event handler, parser, identifier): the largest value
 * SANDBOX_MAX_SOURCE_CHARS may take. The route schemas bound their source fields by it, so a body past it is refused
 * before it is parsed further; the configured limit (at most this) is checked on save and names the field.
 */
export const MAX_SOURCE_CHARS_CEILING = SUPPLIER_CODE_SETTINGS.maxSourceChars.max;
