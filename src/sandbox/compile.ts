// Compilation of supplier TypeScript to the JavaScript that runs in the sandbox.
//
// - Types are erased with Node's own `module.stripTypeScriptTypes` in 'transform' mode (so
//   enums, namespaces and parameter properties work too). Transform mode reformats the code,
//   so a source map is requested and used to report positions in the supplier's source.
// - The JavaScript is then only *compiled* on the host (`new vm.Script`, never run) to catch the
//   syntax errors the TypeScript parser lets through (early errors such as redeclarations).
// - The code must declare a top-level `handle`. Detected without running anything: compiling
//   the code as a function body followed by `let handle;` is a SyntaxError exactly when the
//   code declares `handle` at its top level.
// Results (successes and failures) are cached by SHA-256 of the source in a bounded LRU.

import { createHash } from 'node:crypto';
import { SourceMap, stripTypeScriptTypes } from 'node:module';
import vm from 'node:vm';

export type CompileResult =
  | { ok: true; js: string; hash: string }
  | { ok: false; message: string; line: number; column: number };

/** File names used for supplier code in stacks: compiled JS and the original source. */
export const USER_JS_FILENAME = 'udf.js';
export const USER_TS_FILENAME = 'udf.ts';

const MAX_ENTRIES = 512;
const MAX_TOTAL_CHARS = 64 * 1024 * 1024;

interface CacheEntry {
  result: CompileResult;
  map: SourceMap | null;
  size: number;
}

const cache = new Map<string, CacheEntry>();
let cachedChars = 0;

// Front cache keyed by the source text itself, so the hot path (same code, every report) skips
// the SHA-256 (a Map lookup hashes/compares the string, which is much cheaper). Small sources only.
const FRONT_MAX_ENTRIES = 256;
const FRONT_MAX_SOURCE_CHARS = 64 * 1024;
const front = new Map<string, CompileResult>();

export function sourceHash(source: string): string {
  return createHash('sha256').update(source).digest('hex');
}

export function compileUserCode(source: string): CompileResult {
  const fast = front.get(source);
  if (fast) return fast;
  const result = compileBySha(source);
  if (source.length <= FRONT_MAX_SOURCE_CHARS) {
    front.set(source, result);
    if (front.size > FRONT_MAX_ENTRIES) front.delete(front.keys().next().value as string);
  }
  return result;
}

function compileBySha(source: string): CompileResult {
  const hash = sourceHash(source);
  const hit = cache.get(hash);
  if (hit) {
    cache.delete(hash);
    cache.set(hash, hit);
    return hit.result;
  }
  const entry = compileUncached(source, hash);
  cache.set(hash, entry);
  cachedChars += entry.size;
  while (cache.size > MAX_ENTRIES || (cachedChars > MAX_TOTAL_CHARS && cache.size > 1)) {
    const oldest = cache.keys().next().value as string;
    cachedChars -= cache.get(oldest)!.size;
    cache.delete(oldest);
  }
  return entry.result;
}

/** Test/diagnostic helper. */
export function clearCompileCache(): void {
  front.clear();
  cache.clear();
  cachedChars = 0;
}

/**
 * Rewrites `udf.js:L:C` positions in a stack trace of compiled code to `udf.ts:L:C` positions
 * in the supplier's source (1-based), when the compiled code is still cached.
 */
export function mapStackToSource(hash: string, stack: string): string {
  const map = cache.get(hash)?.map;
  if (!map) return stack;
  return stack.replace(/udf\.js:(\d+):(\d+)/g, (whole, l: string, c: string) => {
    const pos = originalPosition(map, Number(l), Number(c));
    return pos ? `${USER_TS_FILENAME}:${pos.line}:${pos.column}` : whole;
  });
}

function originalPosition(map: SourceMap, line: number, column: number): { line: number; column: number } | null {
  const entry = map.findEntry(line - 1, column - 1) as
    | { originalLine?: number; originalColumn?: number; generatedLine?: number; generatedColumn?: number }
    | undefined;
  if (!entry || entry.originalLine === undefined || entry.originalColumn === undefined) return null;
  // findEntry returns the closest mapping at or before the position: keep the offset if it is
  // on the same generated line.
  const delta = entry.generatedLine === line - 1 ? column - 1 - (entry.generatedColumn ?? 0) : 0;
  return { line: entry.originalLine + 1, column: entry.originalColumn + 1 + Math.max(0, delta) };
}

let warningFiltered = false;

/** `stripTypeScriptTypes` emits an ExperimentalWarning once per process: swallow just that one. */
function stripQuietly(source: string): string {
  if (warningFiltered) {
    return stripTypeScriptTypes(source, { mode: 'transform', sourceMap: true, sourceUrl: USER_TS_FILENAME });
  }
  const original = process.emitWarning;
  process.emitWarning = function (this: unknown, warning: string | Error, ...rest: unknown[]) {
    const text = typeof warning === 'string' ? warning : warning.message;
    if (/stripTypeScriptTypes/.test(text)) return;
    return (original as (...a: unknown[]) => void).call(process, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    return stripTypeScriptTypes(source, { mode: 'transform', sourceMap: true, sourceUrl: USER_TS_FILENAME });
  } finally {
    process.emitWarning = original;
    warningFiltered = true;
  }
}

const SOURCE_MAP_COMMENT = /\n?\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)\s*$/;

function compileUncached(source: string, hash: string): CacheEntry {
  const fail = (message: string, line: number, column: number): CacheEntry => ({
    result: { ok: false, message, line, column },
    map: null,
    size: 256,
  });

  // 1. Erase types.
  let output: string;
  try {
    output = stripQuietly(source);
  } catch (error) {
    const { line, column } = positionFromDecoratedStack(error);
    return fail(`TypeScript syntax error: ${errorMessage(error)}`, line, column);
  }
  let js = output;
  let map: SourceMap | null = null;
  const m = SOURCE_MAP_COMMENT.exec(output);
  if (m) {
    js = output.slice(0, m.index) + '\n';
    try {
      map = new SourceMap(JSON.parse(Buffer.from(m[1], 'base64').toString('utf8')));
    } catch {
      map = null;
    }
  }

  // 2. Syntax check of the JavaScript (compile only, nothing runs on the host).
  try {
    new vm.Script(js, { filename: USER_JS_FILENAME });
  } catch (error) {
    const pos = positionFromDecoratedStack(error);
    const mapped = map ? originalPosition(map, pos.line, pos.column) : null;
    return fail(`Syntax error: ${errorMessage(error)}`, mapped?.line ?? pos.line, mapped?.column ?? pos.column);
  }

  // 3. A top-level `handle` must be declared.
  if (!declaresTopLevelHandle(js)) {
    return fail('The code must define a top-level function handle(...)', 1, 1);
  }

  return { result: { ok: true, js, hash }, map, size: source.length + js.length * 2 };
}

function declaresTopLevelHandle(js: string): boolean {
  try {
    new vm.Script(`(function () {${js}\n;let handle;\n})`);
    return false;
  } catch (error) {
    if (/\bhandle\b.*already been declared/.test(errorMessage(error))) return true;
    // Unexpected: fall back to a textual check.
    return /(^|[;}\s])function\s+handle\s*\(/.test(js);
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Both Node's TypeScript errors and vm.Script syntax errors carry a decorated stack:
 * `file:LINE\n<source line(s)>\n<spaces>^^^\n\nSyntaxError: ...`. Extract the 1-based position.
 */
function positionFromDecoratedStack(error: unknown): { line: number; column: number } {
  const stack = error instanceof Error && typeof error.stack === 'string' ? error.stack : '';
  const lines = stack.split('\n');
  const lineMatch = /:(\d+)\s*$/.exec(lines[0] ?? '');
  const line = lineMatch ? Number(lineMatch[1]) : 1;
  let column = 1;
  for (let i = 1; i < Math.min(lines.length, 12); i++) {
    if (/^\s*\^+\s*$/.test(lines[i])) {
      column = lines[i].indexOf('^') + 1;
      break;
    }
    if (/^\w*Error\b/.test(lines[i])) break;
  }
  return { line, column };
}
