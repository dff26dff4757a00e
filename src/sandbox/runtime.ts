/**
 * The source text of the in-sandbox runtime, as the host compiles it once per isolate. The runtime itself is
 * isolate/bootstrap.ts, type-checked like the rest of src/; its types are erased here once per process with
 * node:module's stripTypeScriptTypes (the one the supplier's code is compiled with: no bundler at run time), and the
 * script calls it with the limits, so its completion value is the object { run, runBatch, collect }.
 */
import { readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import type { RuntimeLimits } from './isolate/bootstrap.ts';
import { DEFAULT_SUPPLIER_CODE_LIMITS, type SupplierCodeLimits } from './limits.ts';

export type { RuntimeLimits } from './isolate/bootstrap.ts';

export const RUNTIME_FILENAME = 'gridgate-runtime.js';

/** The limits the in-sandbox runtime enforces, taken from the supplier-code limits (SANDBOX_*, ./settings.ts). */
export function runtimeLimitsOf(limits: SupplierCodeLimits): RuntimeLimits {
  return {
    maxLogLines: limits.maxLogLines,
    maxLogChars: limits.maxLogLineChars,
    maxCalls: limits.maxCalls,
    maxCallBytes: limits.maxCallBytes,
    maxResultBytes: limits.maxResultBytes,
  };
}

/** The runtime's limits as declared by default in ./settings.ts. */
export const DEFAULT_RUNTIME_LIMITS: Readonly<RuntimeLimits> = Object.freeze(runtimeLimitsOf(DEFAULT_SUPPLIER_CODE_LIMITS));

let bootstrapJs: string | undefined;

/** isolate/bootstrap.ts as JavaScript: one function expression (types blanked out in place, lines and columns kept). */
function bootstrapSource(): string {
  if (bootstrapJs === undefined) {
    const ts = readFileSync(new URL('./isolate/bootstrap.ts', import.meta.url), 'utf8');
    const js = stripTypeScriptTypes(ts, { mode: 'strip' }).trimEnd();
    bootstrapJs = js.endsWith(';') ? js.slice(0, -1) : js;
  }
  return bootstrapJs;
}

export function runtimeSource(limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS): string {
  // each limit a number literal, as the limits always were in this text
  const l =
    `{ maxLogLines: ${String(limits.maxLogLines)}, maxLogChars: ${String(limits.maxLogChars)}, maxCalls: ${String(limits.maxCalls)}, ` +
    `maxCallBytes: ${String(limits.maxCallBytes)}, maxResultBytes: ${String(limits.maxResultBytes)} }`;
  return `${bootstrapSource()}\n(${l}, ${JSON.stringify(RUNTIME_FILENAME)})`;
}
