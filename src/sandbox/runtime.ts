/**
 * The source text of the in-sandbox runtime, as the host compiles it once per isolate. The runtime itself is
 * isolate/bootstrap.ts, type-checked like the rest of src/; its types are erased here once per process with
 * node:module's stripTypeScriptTypes (the one the supplier's code is compiled with: no bundler at run time), and the
 * script calls it with the limits, so its completion value is the object { run, runBatch, collect }.
 */
import { readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import type { RuntimeLimits } from './isolate/bootstrap.ts';

export type { RuntimeLimits } from './isolate/bootstrap.ts';

export const RUNTIME_FILENAME = 'gridgate-runtime.js';

export const DEFAULT_RUNTIME_LIMITS: RuntimeLimits = { maxLogLines: 200, maxLogChars: 2000, maxCalls: 1000, maxCallBytes: 65_536, maxResultBytes: 1_048_576 };

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
