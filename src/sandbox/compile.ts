// Compilation of supplier TypeScript to the JavaScript that runs in the sandbox.
//
// The compiling itself happens in a worker thread (compile-worker.ts), one source at a time: the
// type stripper can be driven into a fault by crafted code, and a fault breaks it for every later
// call in its thread. A thread that faulted (or crashed, or exceeded its time) is terminated and
// replaced, and the source is tried once more on the fresh thread: a fault that repeats there is
// that source's own, answered to its author as a compile error. No other supplier sees it.
// Sources wait per owner (the supplier's environment) and are taken round-robin, so one
// supplier's many compiles do not hold back another's. Saves are limited per owner: the source's
// length, and the number of new (uncached) sources compiled per minute.
// Results (successes and failures, never faults) are cached by SHA-256 of the source in a bounded LRU.
//
// The limits (size, rate, compile time) are the caller's: each call hands in its context's `config.supplierCode`.
// The compiler thread, its queues, the result cache and the rate buckets are one per process, not per context: a
// compiled source is the same whoever asked, a thread costs tens of MB, and the round-robin between suppliers is
// only fair if every compile of the process waits in the same queues. A rate bucket is keyed by its owner (the
// environment) and refilled at the rate the asking call's limits give.

import { createHash } from 'node:crypto';
import { SourceMap } from 'node:module';
import { Worker } from 'node:worker_threads';
import { DEFAULT_SUPPLIER_CODE_LIMITS, type SupplierCodeLimits } from './limits.ts';
import { COMPILER_THREAD, originalPosition, USER_TS_FILENAME, type CompileReply } from './compile-worker.ts';

export { USER_JS_FILENAME, USER_TS_FILENAME } from './compile-worker.ts';

export type CompileResult = { ok: true; js: string; hash: string } | { ok: false; message: string; line: number; column: number };

/** A save refused by the per-owner compile rate; the HTTP layer answers 429. */
export class CompileRateLimited extends Error {}

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
const inflight = new Map<string, Promise<CompileResult>>();

export function sourceHash(source: string): string {
  return createHash('sha256').update(source).digest('hex');
}

/** The cached result for a source, or undefined: never compiles. */
function cached(source: string, hash?: string): CompileResult | undefined {
  const fast = front.get(source);
  if (fast) return fast;
  const key = hash ?? sourceHash(source);
  const hit = cache.get(key);
  if (!hit) return undefined;
  cache.delete(key);
  cache.set(key, hit);
  remember(source, hit.result);
  return hit.result;
}

function remember(source: string, result: CompileResult): void {
  if (source.length > FRONT_MAX_SOURCE_CHARS) return;
  front.set(source, result);
  if (front.size > FRONT_MAX_ENTRIES) front.delete(front.keys().next().value as string);
}

/**
 * Compiles a supplier's source (cached by hash). `owner` is the supplier's environment: its
 * compiles queue apart from other suppliers'. With `save`, the owner's limits apply first: a
 * source over the size limit is a compile error, a new source over the rate limit throws
 * CompileRateLimited. `limits` are the caller's (its context's `config.supplierCode`; default: the declared defaults).
 */
export async function compileUserCode(
  source: string,
  opts: { owner?: string; save?: boolean; limits?: Pick<SupplierCodeLimits, 'maxSourceChars' | 'compilesPerMinute' | 'compileTimeoutMs'> } = {},
): Promise<CompileResult> {
  const limits = opts.limits ?? DEFAULT_SUPPLIER_CODE_LIMITS;
  if (opts.save && source.length > limits.maxSourceChars) {
    return {
      ok: false,
      message: `the code is ${source.length} characters long, over the limit of ${limits.maxSourceChars} (SANDBOX_MAX_SOURCE_CHARS)`,
      line: 1,
      column: 1,
    };
  }
  const fast = front.get(source);
  if (fast) return fast;
  const hash = sourceHash(source);
  const hit = cached(source, hash);
  if (hit) return hit;
  const owner = opts.owner ?? '';
  if (opts.save) {
    if (!inflight.has(hash) && !takeCompileToken(owner, limits.compilesPerMinute)) {
      throw new CompileRateLimited(
        `more than ${limits.compilesPerMinute} new sources compiled in a minute for this environment (SANDBOX_COMPILES_PER_MINUTE): try again shortly`,
      );
    }
  }
  let pending = inflight.get(hash);
  if (!pending) {
    pending = compileInThread(owner, source, hash, limits.compileTimeoutMs).finally(() => inflight.delete(hash));
    inflight.set(hash, pending);
  }
  const result = await pending;
  remember(source, result);
  return result;
}

/** Test/diagnostic helper. */
export function clearCompileCache(): void {
  front.clear();
  cache.clear();
  cachedChars = 0;
  buckets.clear();
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

/**
 * mapStackToSource for a run of `source`. Its source map may have left the cache while the source is still
 * served from the front cache (large sources evict by size); then the source is compiled again for it, so an
 * error names the supplier's line however long ago their code was compiled.
 */
export async function mapStackOfSource(
  source: string,
  hash: string,
  stack: string,
  owner: string,
  limits: Pick<SupplierCodeLimits, 'compileTimeoutMs'> = DEFAULT_SUPPLIER_CODE_LIMITS,
): Promise<string> {
  if (!cache.has(hash) && /udf\.js:\d+:\d+/.test(stack)) {
    let pending = inflight.get(hash);
    if (!pending) {
      pending = compileInThread(owner, source, hash, limits.compileTimeoutMs).finally(() => inflight.delete(hash));
      inflight.set(hash, pending);
    }
    await pending;
  }
  return mapStackToSource(hash, stack);
}

/** Test/diagnostic helper: drops the compiled entries (and their source maps) but not the front cache, as eviction by size does. */
export function forgetSourceMaps(): void {
  cache.clear();
  cachedChars = 0;
}

/** The supplier's own position of a stack's innermost frame in their code (`udf.ts:L:C`, after mapStackToSource), or null. */
export function sourcePositionOf(stack: string): { line: number; column: number } | null {
  // frames only: the message on the first line is the supplier's text and may hold anything
  const m = /^\s+at .*?udf\.ts:(\d+):(\d+)/m.exec(stack);
  return m ? { line: Number(m[1]), column: Number(m[2]) } : null;
}

// ---- rate -----------------------------------------------------------------------------------------

// token bucket per owner: compilesPerMinute tokens, refilled continuously
const buckets = new Map<string, { tokens: number; at: number }>();

function takeCompileToken(owner: string, capacity: number): boolean {
  const now = performance.now();
  const b = buckets.get(owner) ?? { tokens: capacity, at: now };
  b.tokens = Math.min(capacity, b.tokens + ((now - b.at) * capacity) / 60_000);
  b.at = now;
  if (buckets.size > 10_000) buckets.clear();
  buckets.set(owner, b);
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

// ---- the compiler thread ----------------------------------------------------------------------

interface Task {
  source: string;
  /** SANDBOX_COMPILE_TIMEOUT_MS of the caller that queued it */
  timeoutMs: number;
  resolve(reply: CompileReply): void;
}

/** Faults and replacements of the compiler thread (diagnostics and tests). */
export const compilerStats = { faults: 0, threadsStarted: 0 };

const queues = new Map<string, Task[]>();
let thread: { worker: Worker; current: { id: number; task: Task; timer: NodeJS.Timeout } | null } | null = null;
let nextId = 0;

async function compileInThread(owner: string, source: string, hash: string, timeoutMs: number): Promise<CompileResult> {
  let reply = await enqueue(owner, source, timeoutMs);
  // the thread faulted: it has been replaced, and the source gets one more try on a fresh one
  if ('fault' in reply) reply = await enqueue(owner, source, timeoutMs);
  if ('fault' in reply) {
    // not cached: a fault may depend on the thread's state, so a later save tries again
    return {
      ok: false,
      message: `the TypeScript compiler failed on this code (${reply.fault}); deeply nested expressions are the usual cause`,
      line: 1,
      column: 1,
    };
  }
  const entry: CacheEntry = reply.ok
    ? { result: { ok: true, js: reply.js, hash }, map: reply.map ? new SourceMap(JSON.parse(reply.map)) : null, size: source.length + reply.js.length * 2 }
    : { result: { ok: false, message: reply.message, line: reply.line, column: reply.column }, map: null, size: 256 };
  cache.set(hash, entry);
  cachedChars += entry.size;
  while (cache.size > MAX_ENTRIES || (cachedChars > MAX_TOTAL_CHARS && cache.size > 1)) {
    const oldest = cache.keys().next().value as string;
    cachedChars -= cache.get(oldest)!.size;
    cache.delete(oldest);
  }
  return entry.result;
}

function enqueue(owner: string, source: string, timeoutMs: number): Promise<CompileReply> {
  return new Promise((resolve) => {
    const queue = queues.get(owner);
    if (queue) queue.push({ source, timeoutMs, resolve });
    else queues.set(owner, [{ source, timeoutMs, resolve }]);
    pump();
  });
}

/** Sends the next task to the thread when it is idle: the first owner waiting, who then goes to the back. */
function pump(): void {
  if (thread?.current || queues.size === 0) return;
  const [owner, queue] = queues.entries().next().value as [string, Task[]];
  const task = queue.shift()!;
  queues.delete(owner);
  if (queue.length > 0) queues.set(owner, queue);
  const t = thread ?? startThread();
  const id = ++nextId;
  const timeoutMs = task.timeoutMs;
  const timer = setTimeout(() => fault(t, `no answer within ${timeoutMs} ms (SANDBOX_COMPILE_TIMEOUT_MS)`), timeoutMs);
  t.current = { id, task, timer };
  t.worker.ref();
  t.worker.postMessage({ id, source: task.source });
}

function startThread(): NonNullable<typeof thread> {
  const worker = new Worker(new URL('./compile-worker.ts', import.meta.url), {
    workerData: COMPILER_THREAD,
    resourceLimits: { maxOldGenerationSizeMb: 256 },
    stdout: true,
    stderr: true,
  });
  const t: NonNullable<typeof thread> = { worker, current: null };
  thread = t;
  compilerStats.threadsStarted++;
  worker.on('message', (reply: CompileReply) => {
    const current = t.current;
    if (!current || current.id !== reply.id) return;
    if ('fault' in reply) {
      fault(t, reply.fault);
      return;
    }
    clearTimeout(current.timer);
    t.current = null;
    worker.unref();
    current.task.resolve(reply);
    pump();
  });
  worker.on('error', (err) => fault(t, err.message.split('\n')[0]));
  worker.on('exit', (code) => fault(t, `the compiler thread exited (code ${code})`));
  worker.unref();
  return t;
}

/** The thread is not used again: its task gets the fault, the next task starts a new thread. */
function fault(t: NonNullable<typeof thread>, message: string): void {
  if (thread !== t) return;
  thread = null;
  compilerStats.faults++;
  const current = t.current;
  t.current = null;
  if (current) clearTimeout(current.timer);
  void t.worker.terminate().catch(() => undefined);
  current?.task.resolve({ id: current.id, fault: message });
  pump();
}
