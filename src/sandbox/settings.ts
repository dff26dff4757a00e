// The sandbox's settings (SANDBOX_*, ACTIVITY_MAX_BYTES), declared once: the one place for the bounds on supplier code
// and what it produces. `config.supplierCode`, `DEFAULT_SUPPLIER_CODE_LIMITS` (limits.ts) and the table in
// docs/configuration.md come from these declarations. Plain data: the kernel's settings kit is imported for its types
// only (src/app/settings.ts says why).
import type { IntSetting, Settings, SettingsOf } from '../app/settings.ts';

/** Bounds on supplier code and on what it produces, by their name in `SupplierCodeLimits` (applied by src/sandbox/). */
export const SUPPLIER_CODE_SETTINGS = {
  maxSourceChars: {
    kind: 'int',
    env: 'SANDBOX_MAX_SOURCE_CHARS',
    default: 1_000_000,
    min: 1,
    max: 1_000_000,
    description: 'longest event handler, parser or identifier a save compiles (400 naming the field)',
  },
  compilesPerMinute: {
    kind: 'int',
    env: 'SANDBOX_COMPILES_PER_MINUTE',
    default: 60,
    min: 1,
    max: 1_000_000,
    description: 'new (not yet compiled) sources one environment may save per minute (429 `rate_limit_error` beyond)',
  },
  compileTimeoutMs: {
    kind: 'int',
    env: 'SANDBOX_COMPILE_TIMEOUT_MS',
    default: 10_000,
    min: 100,
    max: 600_000,
    description: 'a compile taking longer fails (its compiler thread is replaced)',
  },
  maxAnswerBytes: {
    kind: 'int',
    env: 'SANDBOX_MAX_ANSWER_BYTES',
    default: 65_536,
    min: 0,
    max: 64 * 1024 * 1024,
    description: "body of a handler's answer to a device; a larger one fails the run (500 `handler_error`, invalid-result)",
  },
  maxResultBytes: {
    kind: 'int',
    env: 'SANDBOX_MAX_RESULT_BYTES',
    default: 1_048_576,
    min: 1024,
    max: 256 * 1024 * 1024,
    description: 'JSON of what one run of supplier code returns (answer, parsed report, identifier); a larger one fails the run',
  },
  maxLogLines: {
    kind: 'int',
    env: 'SANDBOX_MAX_LOG_LINES',
    default: 200,
    min: 0,
    max: 100_000,
    description: '`exec.addLog` lines kept per run; an error line says how many were dropped',
  },
  maxLogLineChars: {
    kind: 'int',
    env: 'SANDBOX_MAX_LOG_LINE_CHARS',
    default: 2000,
    min: 1,
    max: 1_000_000,
    description: 'characters kept of one log line (marked `… [truncated]`)',
  },
  maxCalls: {
    kind: 'int',
    env: 'SANDBOX_MAX_CALLS',
    default: 1000,
    min: 0,
    max: 100_000,
    description: "exec calls per run; the next one throws in the supplier's code",
  },
  maxCallBytes: {
    kind: 'int',
    env: 'SANDBOX_MAX_CALL_BYTES',
    default: 65_536,
    min: 64,
    max: 64 * 1024 * 1024,
    description: "JSON of one exec call's arguments (parseReport payload, setDeviceFields fields, ...); a larger call throws in the supplier's code",
  },
  maxActivityBytes: {
    kind: 'int',
    env: 'ACTIVITY_MAX_BYTES',
    default: 1_048_576,
    min: 4096,
    max: 256 * 1024 * 1024,
    description:
      'JSON of one activity as stored (its triggerData and log lines, its sub-activities\' too); parts beyond it are stored as previews marked `"truncated": true`, with an error line saying so',
  },
} as const satisfies Record<string, IntSetting>;

export const SANDBOX_SETTINGS = {
  sandboxMemoryMb: { kind: 'int', env: 'SANDBOX_MEMORY_MB', default: 64, min: 8, max: 4096, description: 'memory limit of one supplier isolate' },
  sandboxTimeoutMs: {
    kind: 'int',
    env: 'SANDBOX_TIMEOUT_MS',
    default: 1000,
    min: 10,
    max: 60_000,
    description: 'wall-clock limit of one run of supplier code',
  },
  sandboxBatchRuns: {
    kind: 'int',
    env: 'SANDBOX_BATCH_RUNS',
    default: 64,
    min: 1,
    max: 1000,
    description:
      "runs of one supplier's code that arrive together go into its isolate in one call, at most this many (`1`: each alone). Each run keeps its own outcome, logs and limits: a batch stops after a failed run, and a batch the isolate fails as a whole (time or memory limit) is run again one run at a time",
  },
  /** bounds on supplier code and what it produces (src/sandbox/limits.ts) */
  supplierCode: { kind: 'group', settings: SUPPLIER_CODE_SETTINGS },
} as const satisfies Settings;

export type SupplierCodeLimits = SettingsOf<typeof SUPPLIER_CODE_SETTINGS>;

declare module '../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof SANDBOX_SETTINGS> {}
}
