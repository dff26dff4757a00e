// Runs supplier code in isolated-vm.
//
// Isolation: one ivm.Isolate per isolationKey (the supplier's connectivity environment), with
// the memory limit. Code of different suppliers never shares an isolate (separate heaps).
// Speed: inside an isolate, one context per compiled code hash, prepared once (runtime + user
// script run, so `handle` is defined) and reused; a run is ONE async `apply` on a Reference to
// the in-sandbox wrapper, passing the args as a JSON string and getting one JSON string back.
// Batches: each async `apply` is a hop to an isolate thread and back (~50 us of CPU alone, more than
// a typical handler run), so the runs of one context and kind that arrive in the same turn of the
// event loop go in as one `runBatch` call. Its outcome per run is that of a run alone: the batch
// stops after a failed run (the context is retired, the rest go on in another call), and a batch
// the isolate fails as a whole (time limit, memory limit) is run again one run at a time, so only
// the run that loops or eats memory fails, with the limit a run alone has.
// Recycling: a context is retired after `recycleAfterRuns` runs and after any failed run, so
// state left in globals can't accumulate; a new one is prepared on the next run.
// Failures: thrown error -> 'error'; wall-clock limit -> 'timeout' (isolated-vm terminates the
// script and the isolate stays usable: only the context is retired); memory limit -> 'memory'
// (isolated-vm disposes the whole isolate: the entry is dropped and recreated on the next run).

import ivm from 'isolated-vm';
import type { Logger } from '../app/logger.ts';
import { compileUserCode, mapStackOfSource, sourcePositionOf, USER_JS_FILENAME, type CompileResult } from './compile.ts';
import { validateIdentifierResult, validateIncomingRequestResponse, validateParsedReport, type Validation } from './report.ts';
import { DEFAULT_SUPPLIER_CODE_LIMITS, type SupplierCodeLimits } from './limits.ts';
import { RUNTIME_FILENAME, runtimeLimitsOf, runtimeSource, type RuntimeLimits } from './runtime.ts';
import type {
  EventHandlerArgs,
  ExecCall,
  HandlerRun,
  IdentifierArgs,
  IdentifierRun,
  ParserArgs,
  ParserRun,
  RunError,
  RunErrorKind,
  RunOutcome,
} from './types.ts';

export interface SandboxOptions {
  /** per isolate (= per isolationKey), MiB; default 64, isolated-vm's minimum is 8 */
  memoryLimitMb: number;
  /** wall-clock limit of one run, ms; default 1000 (a new context's top-level code gets its own limit) */
  timeoutMs: number;
  /** isolates kept (LRU, evicted ones are disposed); default 64 */
  maxIsolates?: number;
  /** compiled codes (contexts) kept per isolate (LRU); default 32 */
  maxContextsPerIsolate?: number;
  /** a context is replaced after this many runs; default 1000 */
  recycleAfterRuns?: number;
  /** bounds on supplier code and its output (the context's `config.supplierCode`); default: the declared defaults (src/sandbox/limits.ts) */
  limits?: SupplierCodeLimits;
  /** overrides of the limits enforced in the sandbox (tests); default: from `limits` */
  runtimeLimits?: Partial<RuntimeLimits>;
  /** body bytes of a handler's answer; default SANDBOX_MAX_ANSWER_BYTES */
  maxAnswerBytes?: number;
  /** isolated-vm reports that V8 lost control of an isolate (the message names it); the host should drain and restart. Default: a process warning */
  onCatastrophicError?: (message: string) => void;
  /** runs of one context and kind taken into one isolate call; default 64 (1: every run alone) */
  maxBatchRuns?: number;
}

type Kind = 'handler' | 'parser' | 'identifier';

interface ContextEntry {
  ready: Promise<void>;
  context: ivm.Context | null;
  run: ivm.Reference | null;
  collect: ivm.Reference | null;
  runBatch: ivm.Reference | null;
  /** runs waiting for the next batch call, by kind; flushed on setImmediate */
  waiting: Map<Kind, WaitingRun[]>;
  runs: number;
  inflight: number;
  retired: boolean;
  released: boolean;
}

/** What a batch makes of a run: its output; ON_ITS_OWN: run it alone in the same context; null: run it alone on a fresh start. */
const ON_ITS_OWN = Symbol('on its own');
type BatchOutcome = string | typeof ON_ITS_OWN | null;
interface WaitingRun {
  json: string;
  settle: (out: BatchOutcome) => void;
}

interface CodeSlot {
  script: Promise<ivm.Script> | null;
  ctx: ContextEntry | null;
}

interface IsolateEntry {
  key: string;
  isolate: ivm.Isolate;
  runtime: Promise<ivm.Script> | null;
  codes: Map<string, CodeSlot>;
  inflight: number;
  evicted: boolean;
}

/** What a run gathers besides its result: its exec calls, console lines and errors. */
interface Gathered {
  calls: ExecCall[];
  logs: string[];
  errors: string[];
}

/** A run's output as the in-sandbox wrapper writes it. */
interface SandboxOut extends Gathered {
  ok: boolean;
  result?: unknown;
  invalidResult?: boolean;
  error?: { name: string; message: string; stack: string };
}

interface RunInput {
  isolationKey: string;
  source: string;
  args: unknown;
}
/** The supplier's code compiled, and the run's arguments as the JSON the wrapper takes. */
interface PreparedCode {
  compiled: Extract<CompileResult, { ok: true }>;
  json: string;
}

/** Compiles the code (cached by its hash) and serialises the arguments; a failure of either is the run's error. */
async function codeAndArguments(input: RunInput, limits: SupplierCodeLimits): Promise<PreparedCode | { error: RunError }> {
  const compiled = await compileUserCode(input.source, { owner: input.isolationKey, limits });
  if (!compiled.ok) return { error: { kind: 'compile', message: compiled.message, line: compiled.line, column: compiled.column } };
  try {
    return { compiled, json: JSON.stringify(input.args ?? null) };
  } catch (error) {
    return { error: { kind: 'error', message: `arguments are not serialisable: ${messageOf(error)}` } };
  }
}

const DEFAULTS = { memoryLimitMb: 64, timeoutMs: 1000, maxIsolates: 64, maxContextsPerIsolate: 32, recycleAfterRuns: 1000, maxBatchRuns: 64 };
/** A batch starts no further run once this share of the time limit has passed (the rest go in the next call). */
const BATCH_BUDGET_SHARE = 0.25;

export class Sandbox {
  readonly memoryLimitMb: number;
  readonly timeoutMs: number;
  readonly maxIsolates: number;
  readonly maxContextsPerIsolate: number;
  readonly recycleAfterRuns: number;
  readonly maxAnswerBytes: number;
  readonly maxBatchRuns: number;
  /** the supplier-code limits this sandbox compiles and runs with */
  readonly limits: SupplierCodeLimits;
  /** calls into isolates (single runs and batches): runs / calls is the batching achieved */
  isolateCalls = 0;
  private readonly runtimeJs: string;
  private readonly onCatastrophicError: ((message: string) => void) | undefined;
  private readonly isolates = new Map<string, IsolateEntry>();
  /** per isolation key: the end of its runs going again alone after a failed batch */
  private readonly reruns = new Map<string, Promise<void>>();
  private seq = 0;
  private disposed = false;

  constructor(opts: Partial<SandboxOptions> = {}) {
    this.memoryLimitMb = Math.max(8, opts.memoryLimitMb ?? DEFAULTS.memoryLimitMb);
    this.timeoutMs = Math.max(1, opts.timeoutMs ?? DEFAULTS.timeoutMs);
    this.maxIsolates = Math.max(1, opts.maxIsolates ?? DEFAULTS.maxIsolates);
    this.maxContextsPerIsolate = Math.max(1, opts.maxContextsPerIsolate ?? DEFAULTS.maxContextsPerIsolate);
    this.recycleAfterRuns = Math.max(1, opts.recycleAfterRuns ?? DEFAULTS.recycleAfterRuns);
    this.maxBatchRuns = Math.max(1, opts.maxBatchRuns ?? DEFAULTS.maxBatchRuns);
    const limits = opts.limits ?? DEFAULT_SUPPLIER_CODE_LIMITS;
    this.limits = limits;
    this.runtimeJs = runtimeSource({ ...runtimeLimitsOf(limits), ...opts.runtimeLimits });
    this.maxAnswerBytes = opts.maxAnswerBytes ?? limits.maxAnswerBytes;
    this.onCatastrophicError = opts.onCatastrophicError;
  }

  /** Device type event handler. `result` is the (validated) answer for incomingRequest events, else null. */
  async runEventHandler(input: { isolationKey: string; source: string; args: EventHandlerArgs }): Promise<HandlerRun> {
    const isRequest = input.args?.event?.type === 'incomingRequest';
    return this.execute('handler', input, (raw) =>
      isRequest ? validateIncomingRequestResponse(raw, this.maxAnswerBytes) : { ok: true, value: null, notes: [] },
    );
  }

  /** Report type parser. */
  async runReportParser(input: { isolationKey: string; source: string; args: ParserArgs }): Promise<ParserRun> {
    const runAt = new Date();
    return this.execute('parser', input, (raw) => validateParsedReport(raw, runAt));
  }

  /** Webhook / certificate identifier. */
  async runIdentifier(input: { isolationKey: string; source: string; args: IdentifierArgs | unknown }): Promise<IdentifierRun> {
    return this.execute('identifier', input, validateIdentifierResult);
  }

  /** Number of live isolates (diagnostics). */
  get isolateCount(): number {
    return this.isolates.size;
  }

  dispose(): void {
    this.disposed = true;
    for (const entry of this.isolates.values()) disposeIsolate(entry);
    this.isolates.clear();
  }

  // ---------------------------------------------------------------------------------------------

  private async execute<R>(kind: Kind, input: RunInput, validate: (raw: unknown) => Validation<R>): Promise<RunOutcome<R>> {
    const outcome = await this.attempt(kind, input, validate, this.maxBatchRuns > 1);
    if (outcome) return outcome;
    // not decided in its batch: the run goes again alone (a fresh context, its own time limit). The runs of a supplier
    // that go again go one after another, so one that eats memory takes no other down with its isolate.
    const key = input.isolationKey;
    const turn = (this.reruns.get(key) ?? Promise.resolve()).then(() => this.attempt(kind, input, validate, false));
    const settled = turn.then(
      () => undefined,
      () => undefined,
    );
    this.reruns.set(key, settled);
    void settled.then(() => {
      if (this.reruns.get(key) === settled) this.reruns.delete(key);
    });
    return (await turn)!;
  }

  /** One run, in a batch or alone; null: its batch could not decide it (run it alone). */
  private async attempt<R>(kind: Kind, input: RunInput, validate: (raw: unknown) => Validation<R>, batched: boolean): Promise<RunOutcome<R> | null> {
    const t0 = performance.now();
    const failed = (partial: Partial<Gathered>, error: RunError): RunOutcome<R> => ({
      ok: false,
      error,
      calls: partial.calls ?? [],
      logs: partial.logs ?? [],
      errors: partial.errors ?? [],
      durationMs: performance.now() - t0,
    });
    if (this.disposed) return failed({}, { kind: 'error', message: 'the sandbox has been disposed' });
    const code = await codeAndArguments(input, this.limits);
    if ('error' in code) return failed({}, code.error);
    const ran = await this.runInContext(kind, input, code, batched);
    if (ran === null) return null;
    if ('error' in ran) return failed(ran.partial, ran.error);
    const out = ran.out;
    try {
      if (!out.ok) {
        const e = out.error ?? { name: 'Error', message: 'unknown error', stack: '' };
        const stack = e.stack ? await mapStackOfSource(input.source, code.compiled.hash, e.stack, input.isolationKey, this.limits) : undefined;
        return failed(out, {
          kind: out.invalidResult ? 'invalid-result' : 'error',
          message: `${e.name}: ${e.message}`,
          ...(stack ? { stack, ...sourcePositionOf(stack) } : {}),
        });
      }
      const checked = validate(out.result);
      if (!checked.ok) return failed(out, { kind: 'invalid-result', message: checked.message });
      const logs = checked.notes.length > 0 ? [...out.logs, ...checked.notes] : out.logs;
      const errors = checked.errors ? [...out.errors, ...checked.errors] : out.errors;
      return { ok: true, result: checked.value, calls: out.calls, logs, errors, durationMs: performance.now() - t0 };
    } catch (error) {
      // Not expected (our own bug): the run fails, nothing escapes.
      return failed({}, { kind: 'error', message: messageOf(error) });
    }
  }

  /**
   * The run in its isolate and context (prepared on first use), in a batch or alone: what the supplier's code gave
   * back, a failure of the isolate (top level, time or memory limit) with what the run gathered before it, or null
   * when its batch could not decide it. Keeps the isolate's and context's counts of runs in flight, and retires a
   * context after a failed run or its `recycleAfterRuns`-th.
   */
  private async runInContext(
    kind: Kind,
    input: RunInput,
    code: PreparedCode,
    batched: boolean,
  ): Promise<{ out: SandboxOut } | { partial: Partial<Gathered>; error: RunError } | null> {
    const iso = this.isolateFor(input.isolationKey);
    iso.inflight++;
    let ctx: ContextEntry | null = null;
    try {
      ctx = this.contextFor(iso, code.compiled.hash, code.compiled.js);
      ctx.inflight++;
      try {
        await ctx.ready;
      } catch (error) {
        const failure = this.classify(iso, ctx, error);
        if (failure.stack) failure.stack = await mapStackOfSource(input.source, code.compiled.hash, failure.stack, input.isolationKey, this.limits);
        return {
          partial: {},
          error: { ...failure, ...(failure.stack ? sourcePositionOf(failure.stack) : null), message: `while running the code's top level: ${failure.message}` },
        };
      }
      if (++ctx.runs >= this.recycleAfterRuns) this.retire(iso, ctx);

      let json: string;
      const fromBatch = batched ? await this.inBatch(iso, ctx, kind, code.json) : ON_ITS_OWN;
      if (fromBatch === null) return null;
      if (fromBatch !== ON_ITS_OWN) {
        json = fromBatch;
      } else {
        const runId = ++this.seq;
        try {
          this.isolateCalls++;
          json = (await ctx.run!.apply(undefined, [kind, runId, code.json], { timeout: this.timeoutMs })) as string;
        } catch (error) {
          const failure = this.classify(iso, ctx, error);
          return { partial: failure.kind === 'memory' ? {} : await this.collect(ctx, runId), error: failure };
        }
      }
      const out = JSON.parse(json) as SandboxOut;
      // a context whose run failed is not used again (state its code left behind)
      if (!out.ok) this.retire(iso, ctx);
      return { out };
    } catch (error) {
      // Not expected (our own bug or an isolate disposed under us): never let it escape.
      if (ctx) this.retire(iso, ctx);
      return { partial: {}, error: { kind: iso.isolate.isDisposed ? 'memory' : 'error', message: messageOf(error) } };
    } finally {
      if (ctx) {
        ctx.inflight--;
        if (ctx.retired && ctx.inflight === 0) releaseContext(ctx);
      }
      iso.inflight--;
      if ((iso.evicted || iso.isolate.isDisposed) && iso.inflight === 0) disposeIsolate(iso);
    }
  }

  /** Queues a run for the context's next batch call of its kind; resolves with its output, or null: run it alone. */
  private inBatch(iso: IsolateEntry, ctx: ContextEntry, kind: Kind, json: string): Promise<BatchOutcome> {
    return new Promise((settle) => {
      let list = ctx.waiting.get(kind);
      if (!list) {
        list = [];
        ctx.waiting.set(kind, list);
        // every run that arrives in this turn of the event loop joins the batch
        setImmediate(() => {
          ctx.waiting.delete(kind);
          for (let i = 0; i < list!.length; i += this.maxBatchRuns) void this.runBatch(iso, ctx, kind, list!.slice(i, i + this.maxBatchRuns));
        });
      }
      list.push({ json, settle });
    });
  }

  /** One call into the isolate for `runs`; what the batch did not start goes in another call. */
  private async runBatch(iso: IsolateEntry, ctx: ContextEntry, kind: Kind, runs: WaitingRun[]): Promise<void> {
    while (runs.length > 0) {
      // a run alone keeps what a single run has (its partial logs and calls after a time limit)
      if (runs.length === 1 || !ctx.runBatch) {
        for (const r of runs) r.settle(ON_ITS_OWN);
        return;
      }
      const first = this.seq + 1;
      this.seq += runs.length;
      let outs: string[];
      try {
        this.isolateCalls++;
        const joined = (await ctx.runBatch.apply(undefined, [kind, first, runs.map((r) => r.json).join('\n'), this.timeoutMs * BATCH_BUDGET_SHARE], {
          timeout: this.timeoutMs,
        })) as string;
        outs = joined.split('\n');
      } catch (error) {
        // the time or memory limit of the whole call: which run caused it is found by running each alone
        this.classify(iso, ctx, error);
        for (const r of runs) r.settle(null);
        return;
      }
      outs.forEach((out, i) => runs[i].settle(out));
      runs = runs.slice(outs.length);
      // after a failed run the context is not used again: the rest run alone, on a fresh one
      if (!outs[outs.length - 1].startsWith('{"ok":true')) {
        this.retire(iso, ctx);
        for (const r of runs) r.settle(null);
        return;
      }
    }
  }

  /** Classifies a failure of an isolated-vm call and retires what must not be reused. */
  private classify(iso: IsolateEntry, ctx: ContextEntry, error: unknown): { kind: RunErrorKind; message: string; stack?: string } {
    const message = messageOf(error);
    if (iso.isolate.isDisposed || /memory limit|isolate (is|was) disposed/i.test(message)) {
      this.dropIsolate(iso);
      return { kind: 'memory', message: `memory limit of ${this.memoryLimitMb} MiB exceeded (${message})` };
    }
    this.retire(iso, ctx);
    if (/timed out/i.test(message)) {
      return { kind: 'timeout', message: `execution exceeded the time limit of ${this.timeoutMs} ms` };
    }
    // Errors thrown by the top-level code (run outside the wrapper) come here too.
    const stack = error instanceof Error && typeof error.stack === 'string' ? error.stack : undefined;
    return { kind: 'error', message, ...(stack ? { stack: cleanHostStack(stack) } : {}) };
  }

  /** Logs and calls gathered by a run that was terminated. */
  private async collect(ctx: ContextEntry, runId: number): Promise<Partial<Gathered>> {
    try {
      const out = (await ctx.collect!.apply(undefined, [runId], { timeout: 100 })) as string;
      return JSON.parse(out) as Gathered;
    } catch {
      return {};
    }
  }

  private isolateFor(key: string): IsolateEntry {
    let entry = this.isolates.get(key);
    if (entry && entry.isolate.isDisposed) {
      this.isolates.delete(key);
      entry = undefined;
    }
    if (entry) {
      this.isolates.delete(key);
      this.isolates.set(key, entry);
      return entry;
    }
    const isolate = new ivm.Isolate({
      memoryLimit: this.memoryLimitMb,
      onCatastrophicError: (message: string) => {
        const line = `isolated-vm catastrophic error in isolate ${key}: ${message}`;
        if (this.onCatastrophicError) this.onCatastrophicError(line);
        else process.emitWarning(line);
      },
    });
    entry = { key, isolate, runtime: null, codes: new Map(), inflight: 0, evicted: false };
    this.isolates.set(key, entry);
    while (this.isolates.size > this.maxIsolates) {
      const oldestKey = this.isolates.keys().next().value as string;
      const oldest = this.isolates.get(oldestKey)!;
      this.isolates.delete(oldestKey);
      oldest.evicted = true;
      if (oldest.inflight === 0) disposeIsolate(oldest);
    }
    return entry;
  }

  private dropIsolate(iso: IsolateEntry): void {
    if (this.isolates.get(iso.key) === iso) this.isolates.delete(iso.key);
    iso.evicted = true;
  }

  private contextFor(iso: IsolateEntry, hash: string, js: string): ContextEntry {
    let slot = iso.codes.get(hash);
    if (slot) {
      iso.codes.delete(hash);
      iso.codes.set(hash, slot);
    } else {
      slot = { script: null, ctx: null };
      iso.codes.set(hash, slot);
      while (iso.codes.size > this.maxContextsPerIsolate) {
        const oldestHash = iso.codes.keys().next().value as string;
        const oldest = iso.codes.get(oldestHash)!;
        iso.codes.delete(oldestHash);
        if (oldest.ctx) this.retire(iso, oldest.ctx);
        void oldest.script?.then((s) => s.release()).catch(() => {});
      }
    }
    if (slot.ctx && !slot.ctx.retired) return slot.ctx;
    const ctx: ContextEntry = {
      ready: Promise.resolve(),
      context: null,
      run: null,
      collect: null,
      runBatch: null,
      waiting: new Map(),
      runs: 0,
      inflight: 0,
      retired: false,
      released: false,
    };
    ctx.ready = this.prepare(iso, slot, ctx, js);
    ctx.ready.catch(() => {}); // observed by the runs awaiting it
    slot.ctx = ctx;
    return ctx;
  }

  /** New context: runtime first (keeps the genuine builtins), then the supplier's top level. */
  private async prepare(iso: IsolateEntry, slot: CodeSlot, ctx: ContextEntry, js: string): Promise<void> {
    const context = await iso.isolate.createContext();
    ctx.context = context;
    iso.runtime ??= iso.isolate.compileScript(this.runtimeJs, { filename: RUNTIME_FILENAME });
    const runtime = await iso.runtime;
    const api = (await runtime.run(context, { reference: true, timeout: this.timeoutMs })) as ivm.Reference;
    ctx.run = (await api.get('run', { reference: true })) as ivm.Reference;
    ctx.collect = (await api.get('collect', { reference: true })) as ivm.Reference;
    ctx.runBatch = (await api.get('runBatch', { reference: true })) as ivm.Reference;
    api.release();
    slot.script ??= iso.isolate.compileScript(js, { filename: USER_JS_FILENAME });
    let script: ivm.Script;
    try {
      script = await slot.script;
    } catch (error) {
      slot.script = null;
      throw error;
    }
    await script.run(context, { timeout: this.timeoutMs });
  }

  private retire(iso: IsolateEntry, ctx: ContextEntry): void {
    if (ctx.retired) return;
    ctx.retired = true;
    for (const slot of iso.codes.values()) if (slot.ctx === ctx) slot.ctx = null;
    if (ctx.inflight === 0) releaseContext(ctx);
  }
}

function releaseContext(ctx: ContextEntry): void {
  if (ctx.released) return;
  ctx.released = true;
  // The context may still be being prepared: release once that settles.
  void ctx.ready
    .catch(() => {})
    .then(() => {
      for (const r of [ctx.run, ctx.collect, ctx.runBatch]) {
        try {
          r?.release();
        } catch {
          // isolate gone
        }
      }
      try {
        ctx.context?.release();
      } catch {
        // isolate gone
      }
      ctx.run = ctx.collect = ctx.runBatch = ctx.context = null;
    });
}

function disposeIsolate(entry: IsolateEntry): void {
  entry.evicted = true;
  try {
    if (!entry.isolate.isDisposed) entry.isolate.dispose();
  } catch {
    // already disposed
  }
}

/**
 * A process's sandbox as its configuration says (SANDBOX_MEMORY_MB, SANDBOX_TIMEOUT_MS, SANDBOX_BATCH_RUNS). An isolate
 * V8 lost control of leaves the process in no known state: that is logged as fatal and the process drains and exits
 * (SIGTERM to itself, the graceful stop of src/main.ts), as isolated-vm asks, for its supervisor to start it again.
 */
export function sandboxFromConfig(
  config: { sandboxMemoryMb: number; sandboxTimeoutMs: number; sandboxBatchRuns: number; supplierCode: SupplierCodeLimits },
  log: Pick<Logger, 'fatal'>,
): Sandbox {
  return new Sandbox({
    memoryLimitMb: config.sandboxMemoryMb,
    timeoutMs: config.sandboxTimeoutMs,
    maxBatchRuns: config.sandboxBatchRuns,
    limits: config.supplierCode,
    onCatastrophicError: (message) => {
      log.fatal({ err: message }, 'supplier code sandbox failed beyond repair: the process stops to be started again');
      process.kill(process.pid, 'SIGTERM');
    },
  });
}

/**
 * A failed run in one line, as the activity log and the identifier refusals show it: the kind, the
 * message and, when the supplier's code threw, the line and column in their own TypeScript source.
 */
export function describeRunError(error: RunError): string {
  const at = error.line !== undefined ? ` (line ${error.line}, column ${error.column})` : '';
  return `${error.kind}: ${error.message}${at}`;
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/** Keeps the supplier-facing part of an isolated-vm error stack (drops host frames). */
function cleanHostStack(stack: string): string {
  return stack
    .split('\n')
    .filter((line) => !/^\s+at /.test(line) || line.includes(USER_JS_FILENAME))
    .join('\n');
}
