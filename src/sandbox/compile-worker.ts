// The compiler thread: erases the types of supplier TypeScript and checks the JavaScript, off the
// host's own state. Node's type stripper is a WebAssembly module; crafted input (about 1,100 nested
// parentheses, a few thousand chained `+ 1`) overflows its stack inside linear memory and leaves the
// module broken for every later call in the same thread ("memory access out of bounds"). Here such
// a fault kills only this thread: the host (compile.ts) replaces it and tells the one author.
//
// - Types are erased with `module.stripTypeScriptTypes` in 'transform' mode (so enums, namespaces
//   and parameter properties work too). Transform mode reformats the code, so a source map is
//   requested and sent back, to report positions in the supplier's source.
// - The JavaScript is then only *compiled* (`new vm.Script`, never run) to catch the syntax errors
//   the TypeScript parser lets through (early errors such as redeclarations).
// - The code must declare a top-level `handle`. Detected without running anything: compiling the
//   code as a function body followed by `let handle;` is a SyntaxError exactly when the code
//   declares `handle` at its top level.

import { SourceMap, stripTypeScriptTypes } from 'node:module';
import vm from 'node:vm';
import { parentPort, workerData } from 'node:worker_threads';

/** workerData of the compiler thread: this module also loads in threads that are not it (the host's, a test runner's). */
export const COMPILER_THREAD = 'gridgate-compiler';

export const USER_JS_FILENAME = 'udf.js';
export const USER_TS_FILENAME = 'udf.ts';

/** What the thread answers for one source. `fault`: the compiler itself failed; this thread must not be used again. */
export type CompileReply =
  | { id: number; ok: true; js: string; map: string | null }
  | { id: number; ok: false; message: string; line: number; column: number }
  | { id: number; fault: string };

// the errors an author's code causes; anything else thrown by the stripper is the stripper failing
const AUTHOR_ERRORS = new Set(['ERR_INVALID_TYPESCRIPT_SYNTAX', 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX']);

class Fault extends Error {}

const SOURCE_MAP_COMMENT = /\n?\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)\s*$/;

export function compileSource(id: number, source: string): CompileReply {
  const fail = (message: string, line: number, column: number): CompileReply => ({ id, ok: false, message, line, column });

  // 1. Erase types.
  let output: string;
  try {
    output = stripTypeScriptTypes(source, { mode: 'transform', sourceMap: true, sourceUrl: USER_TS_FILENAME });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'string' || !AUTHOR_ERRORS.has(code)) throw new Fault(errorMessage(error).split('\n')[0]);
    const { line, column } = positionFromDecoratedStack(error);
    return fail(`TypeScript syntax error: ${errorMessage(error)}`, line, column);
  }
  let js = output;
  let mapJson: string | null = null;
  let map: SourceMap | null = null;
  const m = SOURCE_MAP_COMMENT.exec(output);
  if (m) {
    js = output.slice(0, m.index) + '\n';
    try {
      mapJson = Buffer.from(m[1], 'base64').toString('utf8');
      map = new SourceMap(JSON.parse(mapJson));
    } catch {
      mapJson = null;
    }
  }

  // 2. Syntax check of the JavaScript (compile only, nothing runs).
  try {
    new vm.Script(js, { filename: USER_JS_FILENAME });
  } catch (error) {
    const pos = positionFromDecoratedStack(error);
    const mapped = map ? originalPosition(map, pos.line, pos.column) : null;
    return fail(`Syntax error: ${errorMessage(error)}`, mapped?.line ?? pos.line, mapped?.column ?? pos.column);
  }

  // 3. A top-level `handle` must be declared.
  if (!declaresTopLevelHandle(js)) return fail('The code must define a top-level function handle(...)', 1, 1);

  return { id, ok: true, js, map: mapJson };
}

/** The position in the supplier's source of a 1-based position in the compiled code. */
export function originalPosition(map: SourceMap, line: number, column: number): { line: number; column: number } | null {
  const entry = map.findEntry(line - 1, column - 1) as
    { originalLine?: number; originalColumn?: number; generatedLine?: number; generatedColumn?: number } | undefined;
  if (!entry || entry.originalLine === undefined || entry.originalColumn === undefined) return null;
  // findEntry returns the closest mapping at or before the position: keep the offset if it is
  // on the same generated line.
  const delta = entry.generatedLine === line - 1 ? column - 1 - (entry.generatedColumn ?? 0) : 0;
  return { line: entry.originalLine + 1, column: entry.originalColumn + 1 + Math.max(0, delta) };
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

if (parentPort && workerData === COMPILER_THREAD) {
  const port = parentPort;
  // the stripper's ExperimentalWarning, once per thread: this thread prints nothing
  process.emitWarning = () => undefined;
  port.on('message', ({ id, source }: { id: number; source: string }) => {
    let reply: CompileReply;
    try {
      reply = compileSource(id, source);
    } catch (error) {
      reply = { id, fault: errorMessage(error).split('\n')[0] };
    }
    port.postMessage(reply);
  });
}
