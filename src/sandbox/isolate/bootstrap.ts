/**
 * The in-sandbox runtime: compiled once per isolate and run once per context, BEFORE the supplier's code (so it holds
 * the genuine builtins). This file is not imported: runtime.ts reads it, erases its types (node:module's
 * stripTypeScriptTypes, which leaves every other character where it was) and calls the function below with the
 * limits; that call is the script's completion value, an object { run, runBatch, collect } the host keeps
 * `ivm.Reference`s to. Nothing is put on the global object, so the supplier code cannot see or replace it.
 *
 * It sees only what an isolate has: the ECMAScript builtins and the supplier's global `handle` (no Node.js, no DOM;
 * test/sandbox/bootstrap.test.ts type-checks it with those libraries alone). The function captures nothing from
 * this module: its only import is a type, and the script has no scope around it.
 *
 * run(kind, runId, argsJson) -> JSON string
 *   { ok: true, result, calls, logs, errors }
 *   { ok: false, error: { name, message, stack }, invalidResult?: true, calls, logs, errors }
 * runBatch(kind, firstRunId, argsJsons, budgetMs) -> the outputs of run, for several runs of one kind in one call
 * collect(runId) -> JSON string { calls, logs, errors } of a run that was terminated (timeout).
 * `errors`: the limits the run hit (log lines dropped or cut, exec calls refused), each naming its limit, for the
 * run's log as error lines: seen even when the supplier's code catches a refusal.
 *
 * `kind` is 'handler' | 'parser' | 'identifier'. The handler's exec records calls as plain data; the parser's and
 * identifier's exec only have addLog and the four converters.
 */

/** The limits enforced inside the sandbox (see src/sandbox/limits.ts for their configuration names). */
export interface RuntimeLimits {
  maxLogLines: number;
  maxLogChars: number;
  maxCalls: number;
  /** UTF-8 bytes of the JSON of one exec call's arguments */
  maxCallBytes: number;
  /** UTF-8 bytes of the JSON of handle's return value */
  maxResultBytes: number;
}

export type RunKind = 'handler' | 'parser' | 'identifier';

/** What the host calls through its references: JSON text in, JSON text out. */
export interface SandboxRuntime {
  run(kind: RunKind, runId: number, json: string): string;
  runBatch(kind: RunKind, firstRunId: number, jsons: string, budgetMs: number): string;
  collect(runId: number): string;
}

/** The supplier's entry point, a global of the context once its code ran (absent when it defines none). */
declare const handle: ((args: unknown, exec: Exec) => unknown) | undefined;

interface Call {
  name: string;
  args: unknown;
}
interface RunState {
  calls: Call[];
  logs: string[];
  dropped: number;
  cut: number;
  errors: string[];
}
type Exec = Record<string, (...args: never[]) => unknown>;
type Json = Record<string, unknown>;

// eslint-disable-next-line @typescript-eslint/no-unused-expressions -- the script's value: runtime.ts calls it with the limits
(function bootstrap(limits: RuntimeLimits, runtimeFilename: string): SandboxRuntime {
  'use strict';
  const MAX_LOG_LINES = limits.maxLogLines,
    MAX_LOG_CHARS = limits.maxLogChars,
    MAX_CALLS = limits.maxCalls;
  const MAX_CALL_BYTES = limits.maxCallBytes,
    MAX_RESULT_BYTES = limits.maxResultBytes;
  const JSONparse = JSON.parse,
    JSONstringify = JSON.stringify;
  const isArray = Array.isArray;
  const DateCtor = Date,
    dateNow = Date.now,
    dateToISO = Date.prototype.toISOString,
    dateGetTime = Date.prototype.getTime;
  const U8 = Uint8Array,
    AB = ArrayBuffer,
    isView = ArrayBuffer.isView;
  const ErrorCtor = Error,
    TypeErrorCtor = TypeError,
    RangeErrorCtor = RangeError;
  const StringCtor = String,
    MapCtor = Map,
    ObjectKeys = Object.keys;
  const partial = new MapCtor<number, RunState>();
  const DATE_KEYS = ['lastOnlineAt', 'nextReportBefore', 'startAt', 'endAt', 'createdAt', 'updatedAt', 'sentAt', 'droppedAt', 'deletedAt', 'dueAt'];

  function reviveDates(o: unknown): void {
    if (o === null || typeof o !== 'object') return;
    const r = o as Json;
    for (let i = 0; i < DATE_KEYS.length; i++) {
      const k = DATE_KEYS[i],
        v = r[k];
      if (typeof v === 'string') {
        const d = new DateCtor(v);
        if (dateGetTime.call(d) === dateGetTime.call(d)) r[k] = d;
      }
    }
  }
  function reviveHandlerArgs(a: unknown): void {
    if (a === null || typeof a !== 'object') return;
    const r = a as Json;
    reviveDates(r.device);
    const sc = r.scheduledCommands;
    if (isArray(sc)) for (let i = 0; i < sc.length; i++) if (sc[i]) reviveDates((sc[i] as Json).command);
    const e = r.event;
    if (e && typeof e === 'object') {
      reviveDates((e as Json).command);
      reviveDates((e as Json).pinGroup);
    }
  }
  function reviveParserArgs(a: unknown): void {
    if (a === null || typeof a !== 'object') return;
    reviveDates((a as Json).device);
    reviveDates((a as Json).pinGroup);
  }

  function text(v: unknown): string {
    if (typeof v === 'string') return v;
    try {
      if (v instanceof ErrorCtor) return v.name + ': ' + v.message;
      if (v === undefined || typeof v === 'bigint' || typeof v === 'symbol' || typeof v === 'function') return StringCtor(v);
      const s: string | undefined = JSONstringify(v);
      return s === undefined ? StringCtor(v) : s;
    } catch {
      try {
        return StringCtor(v);
      } catch {
        return '[unprintable value]';
      }
    }
  }

  function makeAddLog(st: RunState): (...values: unknown[]) => void {
    return function addLog(...values: unknown[]): void {
      if (st.logs.length >= MAX_LOG_LINES) {
        st.dropped++;
        return;
      }
      const parts: string[] = [];
      for (let i = 0; i < values.length; i++) parts.push(text(values[i]));
      let line = parts.join(' ');
      if (line.length > MAX_LOG_CHARS) {
        line = line.slice(0, MAX_LOG_CHARS) + '\u2026 [truncated]';
        st.cut++;
      }
      st.logs.push(line);
    };
  }

  function errorsOf(st: RunState): string[] {
    const out = st.errors.slice();
    if (st.dropped > 0)
      out.push(
        st.dropped + (st.dropped === 1 ? ' more log line' : ' more log lines') + ' dropped: at most ' + MAX_LOG_LINES + ' per run (SANDBOX_MAX_LOG_LINES)',
      );
    if (st.cut > 0)
      out.push(
        st.cut + (st.cut === 1 ? ' log line' : ' log lines') + ' cut at ' + MAX_LOG_CHARS + ' characters, marked [truncated] (SANDBOX_MAX_LOG_LINE_CHARS)',
      );
    return out;
  }

  // UTF-8 length of a string when it is over the limit, else 0; only counted where the UTF-16 length leaves it open
  function overBytes(s: string, limit: number): number {
    if (s.length > limit) return s.length;
    if (s.length * 3 <= limit) return 0;
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
        n += 4;
        i++;
      } else n += 3;
    }
    return n > limit ? n : 0;
  }

  // ---- converters (no atob/Buffer in here) ----
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const B64_LOOKUP = new Int16Array(128).fill(-1);
  for (let bi = 0; bi < 64; bi++) B64_LOOKUP[B64.charCodeAt(bi)] = bi;
  B64_LOOKUP[45] = 62;
  B64_LOOKUP[95] = 63; // base64url '-' '_'
  const HEX = '0123456789abcdef';
  const HEX_PAIRS: string[] = [];
  for (let hi = 0; hi < 256; hi++) HEX_PAIRS.push(HEX[hi >> 4] + HEX[hi & 15]);

  function bytesOf(a: unknown, fn: string): Uint8Array {
    if (a instanceof U8) return a;
    if (a instanceof AB) return new U8(a);
    if (isView(a)) return new U8(a.buffer, a.byteOffset, a.byteLength);
    if (isArray(a)) return U8.from(a as number[]);
    throw new TypeErrorCtor(fn + ' expects a Uint8Array, got ' + (a === null ? 'null' : typeof a));
  }
  function isSpace(c: number): boolean {
    return c === 32 || c === 9 || c === 10 || c === 13;
  }
  function base64ToUInt8Array(s: unknown): Uint8Array {
    if (typeof s !== 'string') throw new TypeErrorCtor('base64ToUInt8Array expects a string, got ' + typeof s);
    let n = s.length;
    while (n > 0 && (s.charCodeAt(n - 1) === 61 || isSpace(s.charCodeAt(n - 1)))) n--;
    const out = new U8(Math.floor((n * 3) / 4));
    let buf = 0,
      bits = 0,
      j = 0,
      count = 0;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (isSpace(c)) continue;
      const v = c < 128 ? B64_LOOKUP[c] : -1;
      if (v < 0) throw new TypeErrorCtor('base64ToUInt8Array: invalid character ' + JSONstringify(s[i]) + ' at index ' + i);
      buf = (buf << 6) | v;
      bits += 6;
      count++;
      if (bits >= 8) {
        bits -= 8;
        out[j++] = (buf >> bits) & 255;
        buf &= (1 << bits) - 1;
      }
    }
    if (count % 4 === 1) throw new TypeErrorCtor('base64ToUInt8Array: invalid length');
    return j === out.length ? out : out.slice(0, j);
  }
  function uInt8ArrayToBase64(a: unknown): string {
    const b = bytesOf(a, 'uInt8ArrayToBase64');
    const parts: string[] = [],
      len = b.length;
    let chunk = '';
    for (let i = 0; i < len; i += 3) {
      const x = b[i],
        y = i + 1 < len ? b[i + 1] : 0,
        z = i + 2 < len ? b[i + 2] : 0;
      const t = (x << 16) | (y << 8) | z;
      chunk += B64[t >> 18] + B64[(t >> 12) & 63] + (i + 1 < len ? B64[(t >> 6) & 63] : '=') + (i + 2 < len ? B64[t & 63] : '=');
      if (chunk.length >= 8192) {
        parts.push(chunk);
        chunk = '';
      }
    }
    parts.push(chunk);
    return parts.join('');
  }
  function hexVal(c: number): number {
    if (c >= 48 && c <= 57) return c - 48;
    if (c >= 97 && c <= 102) return c - 87;
    if (c >= 65 && c <= 70) return c - 55;
    return -1;
  }
  function hexToUInt8Array(s: unknown): Uint8Array {
    if (typeof s !== 'string') throw new TypeErrorCtor('hexToUInt8Array expects a string, got ' + typeof s);
    if (s.length % 2 !== 0) throw new TypeErrorCtor('hexToUInt8Array: odd number of hex digits');
    const out = new U8(s.length / 2);
    for (let i = 0; i < out.length; i++) {
      const h = hexVal(s.charCodeAt(2 * i)),
        l = hexVal(s.charCodeAt(2 * i + 1));
      if (h < 0 || l < 0) throw new TypeErrorCtor('hexToUInt8Array: invalid hex digit at index ' + (h < 0 ? 2 * i : 2 * i + 1));
      out[i] = (h << 4) | l;
    }
    return out;
  }
  function uInt8ArrayToHex(a: unknown): string {
    const b = bytesOf(a, 'uInt8ArrayToHex');
    const parts: string[] = [];
    for (let i = 0; i < b.length; i++) parts.push(HEX_PAIRS[b[i]]);
    return parts.join('');
  }

  // ---- argument checks (thrown at the call site, so the supplier sees them in their stack) ----
  function str(v: unknown, what: string): string {
    if (typeof v !== 'string' || v.length === 0)
      throw new TypeErrorCtor(what + ' must be a non-empty string, got ' + (v === null ? 'null' : typeof v === 'string' ? 'an empty string' : typeof v));
    return v;
  }
  function obj(v: unknown, what: string): Json {
    if (v === null || typeof v !== 'object' || isArray(v)) throw new TypeErrorCtor(what + ' must be an object');
    return v as Json;
  }
  function isoDate(v: unknown, what: string): string {
    let d: Date;
    if (v instanceof DateCtor) d = v;
    else if (typeof v === 'string' || typeof v === 'number') d = new DateCtor(v);
    else throw new TypeErrorCtor(what + ' must be a Date, got ' + (v === null ? 'null' : typeof v));
    const t = dateGetTime.call(d);
    if (t !== t) throw new RangeErrorCtor(what + ' is an invalid Date');
    return dateToISO.call(d);
  }
  function plain(v: unknown, what: string): unknown {
    let s: string | undefined;
    try {
      s = JSONstringify(v);
    } catch (e) {
      throw new TypeErrorCtor(what + ' must be JSON-serialisable: ' + (e && (e as Error).message));
    }
    return s === undefined ? null : JSONparse(s);
  }
  function plainObject(v: unknown, what: string): unknown {
    return plain(obj(v, what), what);
  }
  function typedBody(b: unknown, what: string): { type: string; data: unknown } | null {
    if (b === undefined || b === null) return null;
    if (typeof b === 'string') return { type: 'string', data: b };
    if (b instanceof U8 || b instanceof AB || isView(b)) return { type: 'hex', data: uInt8ArrayToHex(b) };
    const o = b as Json;
    if (typeof b === 'object' && !isArray(b) && (o.type === 'json' || o.type === 'string' || o.type === 'hex') && 'data' in o && ObjectKeys(o).length === 2) {
      if (o.type !== 'json' && typeof o.data !== 'string') throw new TypeErrorCtor(what + '.data must be a string for type ' + o.type);
      return { type: o.type, data: o.type === 'json' ? plain(o.data, what + '.data') : o.data };
    }
    return { type: 'json', data: plain(b, what) };
  }
  function headersOf(h: unknown, what: string): Record<string, string | string[]> {
    if (h === undefined || h === null) return {};
    const o = obj(h, what);
    const out: Record<string, string | string[]> = {},
      keys = ObjectKeys(o);
    for (let i = 0; i < keys.length; i++) {
      let v = o[keys[i]];
      if (typeof v === 'number' || typeof v === 'boolean') v = StringCtor(v);
      if (
        typeof v !== 'string' &&
        !(
          isArray(v) &&
          v.every(function (x) {
            return typeof x === 'string';
          })
        )
      )
        throw new TypeErrorCtor(what + '[' + JSONstringify(keys[i]) + '] must be a string');
      out[keys[i]] = isArray(v) ? (v as string[]).slice() : (v as string);
    }
    return out;
  }
  function channelIndices(v: unknown, what: string): number[] | null {
    if (v === undefined || v === null) return null;
    if (!isArray(v)) throw new TypeErrorCtor(what + ' must be an array of channel indices');
    const out: number[] = [];
    for (let i = 0; i < v.length; i++) {
      const x: unknown = v[i];
      if (typeof x !== 'number' || x < 0 || x % 1 !== 0 || x > 2147483647) throw new TypeErrorCtor(what + '[' + i + '] must be an integer >= 0');
      out.push(x);
    }
    return out;
  }

  function converters(exec: Exec): Exec {
    exec.base64ToUInt8Array = base64ToUInt8Array;
    exec.uInt8ArrayToBase64 = uInt8ArrayToBase64;
    exec.hexToUInt8Array = hexToUInt8Array;
    exec.uInt8ArrayToHex = uInt8ArrayToHex;
    return exec;
  }

  function handlerExec(st: RunState): Exec {
    function rec(name: string, args: unknown): void {
      let refusal: string | null = null;
      if (st.calls.length >= MAX_CALLS) refusal = name + ': too many exec calls in one run (limit ' + MAX_CALLS + ', SANDBOX_MAX_CALLS)';
      else {
        const size = overBytes(JSONstringify(args), MAX_CALL_BYTES);
        if (size > 0) refusal = name + ': the arguments are ' + size + ' bytes of JSON, over the limit of ' + MAX_CALL_BYTES + ' (SANDBOX_MAX_CALL_BYTES)';
      }
      if (refusal !== null) {
        if (st.errors.length < 20) st.errors.push('refused ' + refusal);
        throw new RangeErrorCtor(refusal);
      }
      st.calls.push({ name: name, args: args });
    }
    return converters({
      parseReport: function parseReport(arg: unknown) {
        const o = obj(arg, 'parseReport: the argument');
        const reportTypeHashId = str(o.reportTypeHashId, 'parseReport: reportTypeHashId');
        if (typeof o.payload !== 'string')
          throw new TypeErrorCtor('parseReport: payload must be a string, got ' + (o.payload === null ? 'null' : typeof o.payload));
        rec('parseReport', {
          reportTypeHashId: reportTypeHashId,
          payload: o.payload,
          generatedAt: o.generatedAt === undefined || o.generatedAt === null ? null : isoDate(o.generatedAt, 'parseReport: generatedAt'),
        });
      },
      markCommandAsSent: function markCommandAsSent(commandHashId: unknown) {
        rec('markCommandAsSent', { commandHashId: str(commandHashId, 'markCommandAsSent: commandHashId') });
      },
      dropCommand: function dropCommand(commandHashId: unknown, options: unknown) {
        const id = str(commandHashId, 'dropCommand: commandHashId');
        let del = false;
        if (options !== undefined && options !== null) del = obj(options, 'dropCommand: options').markAsDeleted === true;
        rec('dropCommand', { commandHashId: id, markAsDeleted: del });
      },
      scheduleCommand: function scheduleCommand(arg: unknown) {
        const o = obj(arg, 'scheduleCommand: the argument');
        rec('scheduleCommand', {
          commandTypeHashId: str(o.commandTypeHashId, 'scheduleCommand: commandTypeHashId'),
          fields: o.fields === undefined || o.fields === null ? {} : plainObject(o.fields, 'scheduleCommand: fields'),
          startAt: o.startAt === undefined || o.startAt === null ? null : isoDate(o.startAt, 'scheduleCommand: startAt'),
          endAt: o.endAt === undefined || o.endAt === null ? null : isoDate(o.endAt, 'scheduleCommand: endAt'),
          channelIndices: channelIndices(o.channelIndices, 'scheduleCommand: channelIndices'),
        });
      },
      setDeviceFields: function setDeviceFields(fields: unknown) {
        rec('setDeviceFields', { fields: plainObject(fields, 'setDeviceFields: fields') });
      },
      increaseReportingCounter: function increaseReportingCounter(at: unknown) {
        rec('increaseReportingCounter', { at: at === undefined || at === null ? null : isoDate(at, 'increaseReportingCounter: at') });
      },
      expectNextReportBefore: function expectNextReportBefore(date: unknown) {
        if (date === undefined) throw new TypeErrorCtor('expectNextReportBefore expects a Date or null');
        rec('expectNextReportBefore', { before: date === null ? null : isoDate(date, 'expectNextReportBefore: date') });
      },
      sendRequest: function sendRequest(arg: unknown) {
        const o = obj(arg, 'sendRequest: the argument');
        rec('sendRequest', {
          url: str(o.url, 'sendRequest: url'),
          method: str(o.method, 'sendRequest: method').toUpperCase(),
          headers: headersOf(o.headers, 'sendRequest: headers'),
          body: typedBody(o.body, 'sendRequest: body'),
        });
      },
      offerFirmware: function offerFirmware(firmwareHashId: unknown) {
        rec('offerFirmware', { firmwareHashId: str(firmwareHashId, 'offerFirmware: firmwareHashId') });
      },
      addLog: makeAddLog(st),
    });
  }
  function basicExec(st: RunState): Exec {
    return converters({ addLog: makeAddLog(st) });
  }

  function cleanStack(e: unknown): string {
    const stack = e && typeof (e as Error).stack === 'string' ? ((e as Error).stack as string) : '';
    return stack
      .split('\n')
      .filter(function (l) {
        return l.indexOf(runtimeFilename) < 0;
      })
      .join('\n');
  }
  function describe(e: unknown): { name: string; message: string; stack: string } {
    try {
      if (e instanceof ErrorCtor || (e !== null && typeof e === 'object' && typeof (e as Error).message === 'string')) {
        const err = e as Error;
        return { name: StringCtor(err.name || 'Error'), message: StringCtor(err.message), stack: cleanStack(e) };
      }
      return { name: 'Error', message: 'Uncaught ' + text(e), stack: '' };
    } catch {
      return { name: 'Error', message: 'Uncaught exception (unprintable)', stack: '' };
    }
  }

  // NaN/Infinity would silently become null in JSON: make them visible to the host's validation.
  function markNonFinite(r: unknown): unknown {
    if (r === null || typeof r !== 'object' || !isArray((r as Json).measurements)) return r;
    const ms = (r as Json).measurements as unknown[];
    let copy: unknown[] | null = null;
    for (let i = 0; i < ms.length; i++) {
      const m = ms[i];
      if (m === null || typeof m !== 'object') continue;
      const keys = ['channelIndex', 'orderOfMagnitude', 'significand'];
      for (let k = 0; k < keys.length; k++) {
        const v = (m as Json)[keys[k]];
        if (typeof v === 'number' && !(v - v === 0)) {
          if (copy === null) {
            copy = ms.slice();
          }
          if (copy[i] === m) {
            const c: Json = {};
            const mk = ObjectKeys(m);
            for (let q = 0; q < mk.length; q++) c[mk[q]] = (m as Json)[mk[q]];
            copy[i] = c;
          }
          (copy[i] as Json)[keys[k]] = { nonFinite: StringCtor(v) };
        }
      }
    }
    if (copy === null) return r;
    const out: Json = {},
      rk = ObjectKeys(r);
    for (let j = 0; j < rk.length; j++) out[rk[j]] = (r as Json)[rk[j]];
    out.measurements = copy;
    return out;
  }

  function run(kind: RunKind, runId: number, json: string): string {
    const st: RunState = { calls: [], logs: [], dropped: 0, cut: 0, errors: [] };
    partial.set(runId, st);
    let out: string | undefined;
    try {
      const args: unknown = JSONparse(json);
      let exec: Exec;
      if (kind === 'handler') {
        reviveHandlerArgs(args);
        exec = handlerExec(st);
      } else {
        if (kind === 'parser') reviveParserArgs(args);
        exec = basicExec(st);
      }
      if (typeof handle !== 'function') throw new TypeErrorCtor('handle is not a function');
      const result = handle(args, exec);
      if (result !== null && typeof result === 'object' && typeof (result as { then?: unknown }).then === 'function') {
        out = JSONstringify({
          ok: false,
          invalidResult: true,
          error: { name: 'TypeError', message: 'handle returned a Promise: it must return its result synchronously', stack: '' },
          calls: st.calls,
          logs: st.logs,
          errors: errorsOf(st),
        });
      } else {
        let resultJson: string | undefined;
        try {
          resultJson = JSONstringify(kind === 'parser' ? markNonFinite(result) : result);
        } catch (e) {
          out = JSONstringify({
            ok: false,
            invalidResult: true,
            error: { name: 'TypeError', message: 'the value returned by handle is not JSON-serialisable: ' + text(e && (e as Error).message), stack: '' },
            calls: st.calls,
            logs: st.logs,
            errors: errorsOf(st),
          });
        }
        const resultSize = out === undefined && resultJson !== undefined ? overBytes(resultJson, MAX_RESULT_BYTES) : 0;
        if (resultSize > 0) {
          out = JSONstringify({
            ok: false,
            invalidResult: true,
            error: {
              name: 'RangeError',
              message:
                'the value returned by handle is ' + resultSize + ' bytes of JSON, over the limit of ' + MAX_RESULT_BYTES + ' (SANDBOX_MAX_RESULT_BYTES)',
              stack: '',
            },
            calls: st.calls,
            logs: st.logs,
            errors: errorsOf(st),
          });
        }
        if (out === undefined) {
          out =
            '{"ok":true,"result":' +
            (resultJson === undefined ? 'null' : resultJson) +
            ',"calls":' +
            JSONstringify(st.calls) +
            ',"logs":' +
            JSONstringify(st.logs) +
            ',"errors":' +
            JSONstringify(errorsOf(st)) +
            '}';
        }
      }
    } catch (e) {
      out = JSONstringify({ ok: false, error: describe(e), calls: st.calls, logs: st.logs, errors: errorsOf(st) });
    }
    partial.delete(runId);
    return out;
  }

  // runBatch(kind, firstRunId, jsons, budgetMs) -> outputs: runs of one kind in one call into the isolate (one thread hop
  // instead of one per run). `jsons` and the result are JSON texts joined by '\n' (JSON text never holds a raw newline).
  // It stops after a failed run (the host retires the context, as after a single failed run) and starts no run once
  // budgetMs have passed: the host runs what is left in another call.
  function runBatch(kind: RunKind, firstRunId: number, jsons: string, budgetMs: number): string {
    const parts = jsons.split('\n'),
      outs: string[] = [],
      t0 = dateNow();
    for (let i = 0; i < parts.length; i++) {
      if (i > 0 && dateNow() - t0 >= budgetMs) break;
      const out = run(kind, firstRunId + i, parts[i]);
      outs.push(out);
      if (out.lastIndexOf('{"ok":true', 0) !== 0) break;
    }
    return outs.join('\n');
  }

  function collect(runId: number): string {
    const st = partial.get(runId);
    partial.delete(runId);
    if (!st) return '{"calls":[],"logs":[],"errors":[]}';
    return JSONstringify({ calls: st.calls, logs: st.logs, errors: errorsOf(st) });
  }

  return { run: run, runBatch: runBatch, collect: collect };
});
