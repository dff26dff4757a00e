// The in-sandbox runtime: plain JavaScript compiled once per isolate and run once per context,
// BEFORE the supplier's code (so it holds the genuine builtins). Its completion value is an
// object { run, runBatch, collect } that the host keeps `ivm.Reference`s to; nothing is put on the global
// object, so the supplier code cannot see or replace it.
//
// run(kind, runId, argsJson) -> JSON string
//   { ok: true, result, calls, logs, errors }
//   { ok: false, error: { name, message, stack }, invalidResult?: true, calls, logs, errors }
// runBatch(kind, firstRunId, argsJsons, budgetMs) -> the outputs of run, for several runs of one kind in one call
// collect(runId) -> JSON string { calls, logs, errors } of a run that was terminated (timeout).
// `errors`: the limits the run hit (log lines dropped or cut, exec calls refused), each naming its
// limit, for the run's log as error lines: seen even when the supplier's code catches a refusal.
//
// `kind` is 'handler' | 'parser' | 'identifier'. The handler's exec records calls as plain data;
// the parser's and identifier's exec only have addLog and the four converters.

export const RUNTIME_FILENAME = 'gridgate-runtime.js';

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

export const DEFAULT_RUNTIME_LIMITS: RuntimeLimits = { maxLogLines: 200, maxLogChars: 2000, maxCalls: 1000, maxCallBytes: 65_536, maxResultBytes: 1_048_576 };

export function runtimeSource(limits: RuntimeLimits = DEFAULT_RUNTIME_LIMITS): string {
  return RUNTIME.replace('__MAX_LOG_LINES__', String(limits.maxLogLines))
    .replace('__MAX_LOG_CHARS__', String(limits.maxLogChars))
    .replace('__MAX_CALLS__', String(limits.maxCalls))
    .replace('__MAX_CALL_BYTES__', String(limits.maxCallBytes))
    .replace('__MAX_RESULT_BYTES__', String(limits.maxResultBytes));
}

const RUNTIME = String.raw`(function () {
'use strict';
var MAX_LOG_LINES = __MAX_LOG_LINES__, MAX_LOG_CHARS = __MAX_LOG_CHARS__, MAX_CALLS = __MAX_CALLS__;
var MAX_CALL_BYTES = __MAX_CALL_BYTES__, MAX_RESULT_BYTES = __MAX_RESULT_BYTES__;
var G = globalThis;
var JSONparse = JSON.parse, JSONstringify = JSON.stringify;
var isArray = Array.isArray;
var DateCtor = Date, dateNow = Date.now, dateToISO = Date.prototype.toISOString, dateGetTime = Date.prototype.getTime;
var U8 = Uint8Array, AB = ArrayBuffer, isView = ArrayBuffer.isView;
var ErrorCtor = Error, TypeErrorCtor = TypeError, RangeErrorCtor = RangeError;
var StringCtor = String, MapCtor = Map, ObjectKeys = Object.keys, ObjectProto = Object.prototype;
var getProto = Object.getPrototypeOf;
var partial = new MapCtor();
var DATE_KEYS = ['lastOnlineAt', 'nextReportBefore', 'startAt', 'endAt', 'createdAt', 'updatedAt', 'sentAt', 'droppedAt', 'deletedAt', 'dueAt'];

function reviveDates(o) {
  if (o === null || typeof o !== 'object') return;
  for (var i = 0; i < DATE_KEYS.length; i++) {
    var k = DATE_KEYS[i], v = o[k];
    if (typeof v === 'string') {
      var d = new DateCtor(v);
      if (dateGetTime.call(d) === dateGetTime.call(d)) o[k] = d;
    }
  }
}
function reviveHandlerArgs(a) {
  if (a === null || typeof a !== 'object') return;
  reviveDates(a.device);
  var sc = a.scheduledCommands;
  if (isArray(sc)) for (var i = 0; i < sc.length; i++) if (sc[i]) reviveDates(sc[i].command);
  var e = a.event;
  if (e && typeof e === 'object') { reviveDates(e.command); reviveDates(e.pinGroup); }
}
function reviveParserArgs(a) {
  if (a === null || typeof a !== 'object') return;
  reviveDates(a.device);
  reviveDates(a.pinGroup);
}

function text(v) {
  if (typeof v === 'string') return v;
  try {
    if (v instanceof ErrorCtor) return v.name + ': ' + v.message;
    if (v === undefined || typeof v === 'bigint' || typeof v === 'symbol' || typeof v === 'function') return StringCtor(v);
    var s = JSONstringify(v);
    return s === undefined ? StringCtor(v) : s;
  } catch (_) {
    try { return StringCtor(v); } catch (_2) { return '[unprintable value]'; }
  }
}

function makeAddLog(st) {
  return function addLog() {
    if (st.logs.length >= MAX_LOG_LINES) { st.dropped++; return; }
    var parts = [];
    for (var i = 0; i < arguments.length; i++) parts.push(text(arguments[i]));
    var line = parts.join(' ');
    if (line.length > MAX_LOG_CHARS) { line = line.slice(0, MAX_LOG_CHARS) + '\u2026 [truncated]'; st.cut++; }
    st.logs.push(line);
  };
}

function errorsOf(st) {
  var out = st.errors.slice();
  if (st.dropped > 0) out.push(st.dropped + (st.dropped === 1 ? ' more log line' : ' more log lines') + ' dropped: at most ' + MAX_LOG_LINES + ' per run (SANDBOX_MAX_LOG_LINES)');
  if (st.cut > 0) out.push(st.cut + (st.cut === 1 ? ' log line' : ' log lines') + ' cut at ' + MAX_LOG_CHARS + ' characters, marked [truncated] (SANDBOX_MAX_LOG_LINE_CHARS)');
  return out;
}

// UTF-8 length of a string when it is over the limit, else 0; only counted where the UTF-16 length leaves it open
function overBytes(s, limit) {
  if (s.length > limit) return s.length;
  if (s.length * 3 <= limit) return 0;
  var n = 0;
  for (var i = 0; i < s.length; i++) {
    var c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { n += 4; i++; }
    else n += 3;
  }
  return n > limit ? n : 0;
}

// ---- converters (no atob/Buffer in here) ----
var B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
var B64_LOOKUP = new Int16Array(128).fill(-1);
for (var bi = 0; bi < 64; bi++) B64_LOOKUP[B64.charCodeAt(bi)] = bi;
B64_LOOKUP[45] = 62; B64_LOOKUP[95] = 63; // base64url '-' '_'
var HEX = '0123456789abcdef';
var HEX_PAIRS = [];
for (var hi = 0; hi < 256; hi++) HEX_PAIRS.push(HEX[hi >> 4] + HEX[hi & 15]);

function bytesOf(a, fn) {
  if (a instanceof U8) return a;
  if (a instanceof AB) return new U8(a);
  if (isView(a)) return new U8(a.buffer, a.byteOffset, a.byteLength);
  if (isArray(a)) return U8.from(a);
  throw new TypeErrorCtor(fn + ' expects a Uint8Array, got ' + (a === null ? 'null' : typeof a));
}
function isSpace(c) { return c === 32 || c === 9 || c === 10 || c === 13; }
function base64ToUInt8Array(s) {
  if (typeof s !== 'string') throw new TypeErrorCtor('base64ToUInt8Array expects a string, got ' + typeof s);
  var n = s.length;
  while (n > 0 && (s.charCodeAt(n - 1) === 61 || isSpace(s.charCodeAt(n - 1)))) n--;
  var out = new U8(Math.floor(n * 3 / 4));
  var buf = 0, bits = 0, j = 0, count = 0;
  for (var i = 0; i < n; i++) {
    var c = s.charCodeAt(i);
    if (isSpace(c)) continue;
    var v = c < 128 ? B64_LOOKUP[c] : -1;
    if (v < 0) throw new TypeErrorCtor('base64ToUInt8Array: invalid character ' + JSONstringify(s[i]) + ' at index ' + i);
    buf = (buf << 6) | v; bits += 6; count++;
    if (bits >= 8) { bits -= 8; out[j++] = (buf >> bits) & 255; buf &= (1 << bits) - 1; }
  }
  if (count % 4 === 1) throw new TypeErrorCtor('base64ToUInt8Array: invalid length');
  return j === out.length ? out : out.slice(0, j);
}
function uInt8ArrayToBase64(a) {
  var b = bytesOf(a, 'uInt8ArrayToBase64');
  var parts = [], chunk = '', len = b.length;
  for (var i = 0; i < len; i += 3) {
    var x = b[i], y = i + 1 < len ? b[i + 1] : 0, z = i + 2 < len ? b[i + 2] : 0;
    var t = (x << 16) | (y << 8) | z;
    chunk += B64[t >> 18] + B64[(t >> 12) & 63] + (i + 1 < len ? B64[(t >> 6) & 63] : '=') + (i + 2 < len ? B64[t & 63] : '=');
    if (chunk.length >= 8192) { parts.push(chunk); chunk = ''; }
  }
  parts.push(chunk);
  return parts.join('');
}
function hexVal(c) {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}
function hexToUInt8Array(s) {
  if (typeof s !== 'string') throw new TypeErrorCtor('hexToUInt8Array expects a string, got ' + typeof s);
  if (s.length % 2 !== 0) throw new TypeErrorCtor('hexToUInt8Array: odd number of hex digits');
  var out = new U8(s.length / 2);
  for (var i = 0; i < out.length; i++) {
    var h = hexVal(s.charCodeAt(2 * i)), l = hexVal(s.charCodeAt(2 * i + 1));
    if (h < 0 || l < 0) throw new TypeErrorCtor('hexToUInt8Array: invalid hex digit at index ' + (h < 0 ? 2 * i : 2 * i + 1));
    out[i] = (h << 4) | l;
  }
  return out;
}
function uInt8ArrayToHex(a) {
  var b = bytesOf(a, 'uInt8ArrayToHex');
  var parts = [];
  for (var i = 0; i < b.length; i++) parts.push(HEX_PAIRS[b[i]]);
  return parts.join('');
}

// ---- argument checks (thrown at the call site, so the supplier sees them in their stack) ----
function str(v, what) {
  if (typeof v !== 'string' || v.length === 0) throw new TypeErrorCtor(what + ' must be a non-empty string, got ' + (v === null ? 'null' : typeof v === 'string' ? 'an empty string' : typeof v));
  return v;
}
function obj(v, what) {
  if (v === null || typeof v !== 'object' || isArray(v)) throw new TypeErrorCtor(what + ' must be an object');
  return v;
}
function isoDate(v, what) {
  var d;
  if (v instanceof DateCtor) d = v;
  else if (typeof v === 'string' || typeof v === 'number') d = new DateCtor(v);
  else throw new TypeErrorCtor(what + ' must be a Date, got ' + (v === null ? 'null' : typeof v));
  var t = dateGetTime.call(d);
  if (t !== t) throw new RangeErrorCtor(what + ' is an invalid Date');
  return dateToISO.call(d);
}
function plain(v, what) {
  var s;
  try { s = JSONstringify(v); } catch (e) { throw new TypeErrorCtor(what + ' must be JSON-serialisable: ' + (e && e.message)); }
  return s === undefined ? null : JSONparse(s);
}
function plainObject(v, what) { return plain(obj(v, what), what); }
function typedBody(b, what) {
  if (b === undefined || b === null) return null;
  if (typeof b === 'string') return { type: 'string', data: b };
  if (b instanceof U8 || b instanceof AB || isView(b)) return { type: 'hex', data: uInt8ArrayToHex(b) };
  if (typeof b === 'object' && !isArray(b) && (b.type === 'json' || b.type === 'string' || b.type === 'hex') && 'data' in b && ObjectKeys(b).length === 2) {
    if (b.type !== 'json' && typeof b.data !== 'string') throw new TypeErrorCtor(what + '.data must be a string for type ' + b.type);
    return { type: b.type, data: b.type === 'json' ? plain(b.data, what + '.data') : b.data };
  }
  return { type: 'json', data: plain(b, what) };
}
function headersOf(h, what) {
  if (h === undefined || h === null) return {};
  obj(h, what);
  var out = {}, keys = ObjectKeys(h);
  for (var i = 0; i < keys.length; i++) {
    var v = h[keys[i]];
    if (typeof v === 'number' || typeof v === 'boolean') v = StringCtor(v);
    if (typeof v !== 'string' && !(isArray(v) && v.every(function (x) { return typeof x === 'string'; })))
      throw new TypeErrorCtor(what + '[' + JSONstringify(keys[i]) + '] must be a string');
    out[keys[i]] = isArray(v) ? v.slice() : v;
  }
  return out;
}
function channelIndices(v, what) {
  if (v === undefined || v === null) return null;
  if (!isArray(v)) throw new TypeErrorCtor(what + ' must be an array of channel indices');
  var out = [];
  for (var i = 0; i < v.length; i++) {
    var x = v[i];
    if (typeof x !== 'number' || x < 0 || x % 1 !== 0 || x > 2147483647) throw new TypeErrorCtor(what + '[' + i + '] must be an integer >= 0');
    out.push(x);
  }
  return out;
}

function converters(exec) {
  exec.base64ToUInt8Array = base64ToUInt8Array;
  exec.uInt8ArrayToBase64 = uInt8ArrayToBase64;
  exec.hexToUInt8Array = hexToUInt8Array;
  exec.uInt8ArrayToHex = uInt8ArrayToHex;
  return exec;
}

function handlerExec(st) {
  function rec(name, args) {
    var refusal = null;
    if (st.calls.length >= MAX_CALLS) refusal = name + ': too many exec calls in one run (limit ' + MAX_CALLS + ', SANDBOX_MAX_CALLS)';
    else {
      var size = overBytes(JSONstringify(args), MAX_CALL_BYTES);
      if (size > 0) refusal = name + ': the arguments are ' + size + ' bytes of JSON, over the limit of ' + MAX_CALL_BYTES + ' (SANDBOX_MAX_CALL_BYTES)';
    }
    if (refusal !== null) {
      if (st.errors.length < 20) st.errors.push('refused ' + refusal);
      throw new RangeErrorCtor(refusal);
    }
    st.calls.push({ name: name, args: args });
  }
  return converters({
    parseReport: function parseReport(o) {
      obj(o, 'parseReport: the argument');
      var reportTypeHashId = str(o.reportTypeHashId, 'parseReport: reportTypeHashId');
      if (typeof o.payload !== 'string') throw new TypeErrorCtor('parseReport: payload must be a string, got ' + (o.payload === null ? 'null' : typeof o.payload));
      rec('parseReport', { reportTypeHashId: reportTypeHashId, payload: o.payload, generatedAt: o.generatedAt === undefined || o.generatedAt === null ? null : isoDate(o.generatedAt, 'parseReport: generatedAt') });
    },
    markCommandAsSent: function markCommandAsSent(commandHashId) {
      rec('markCommandAsSent', { commandHashId: str(commandHashId, 'markCommandAsSent: commandHashId') });
    },
    dropCommand: function dropCommand(commandHashId, options) {
      var id = str(commandHashId, 'dropCommand: commandHashId');
      var del = false;
      if (options !== undefined && options !== null) del = obj(options, 'dropCommand: options').markAsDeleted === true;
      rec('dropCommand', { commandHashId: id, markAsDeleted: del });
    },
    scheduleCommand: function scheduleCommand(o) {
      obj(o, 'scheduleCommand: the argument');
      rec('scheduleCommand', {
        commandTypeHashId: str(o.commandTypeHashId, 'scheduleCommand: commandTypeHashId'),
        fields: o.fields === undefined || o.fields === null ? {} : plainObject(o.fields, 'scheduleCommand: fields'),
        startAt: o.startAt === undefined || o.startAt === null ? null : isoDate(o.startAt, 'scheduleCommand: startAt'),
        endAt: o.endAt === undefined || o.endAt === null ? null : isoDate(o.endAt, 'scheduleCommand: endAt'),
        channelIndices: channelIndices(o.channelIndices, 'scheduleCommand: channelIndices')
      });
    },
    setDeviceFields: function setDeviceFields(fields) {
      rec('setDeviceFields', { fields: plainObject(fields, 'setDeviceFields: fields') });
    },
    increaseReportingCounter: function increaseReportingCounter(at) {
      rec('increaseReportingCounter', { at: at === undefined || at === null ? null : isoDate(at, 'increaseReportingCounter: at') });
    },
    expectNextReportBefore: function expectNextReportBefore(date) {
      if (date === undefined) throw new TypeErrorCtor('expectNextReportBefore expects a Date or null');
      rec('expectNextReportBefore', { before: date === null ? null : isoDate(date, 'expectNextReportBefore: date') });
    },
    sendRequest: function sendRequest(o) {
      obj(o, 'sendRequest: the argument');
      rec('sendRequest', {
        url: str(o.url, 'sendRequest: url'),
        method: str(o.method, 'sendRequest: method').toUpperCase(),
        headers: headersOf(o.headers, 'sendRequest: headers'),
        body: typedBody(o.body, 'sendRequest: body')
      });
    },
    offerFirmware: function offerFirmware(firmwareHashId) {
      rec('offerFirmware', { firmwareHashId: str(firmwareHashId, 'offerFirmware: firmwareHashId') });
    },
    addLog: makeAddLog(st)
  });
}
function basicExec(st) {
  return converters({ addLog: makeAddLog(st) });
}

function cleanStack(e) {
  var stack = e && typeof e.stack === 'string' ? e.stack : '';
  return stack.split('\n').filter(function (l) { return l.indexOf('${RUNTIME_FILENAME}') < 0; }).join('\n');
}
function describe(e) {
  try {
    if (e instanceof ErrorCtor || (e !== null && typeof e === 'object' && typeof e.message === 'string')) {
      return { name: StringCtor(e.name || 'Error'), message: StringCtor(e.message), stack: cleanStack(e) };
    }
    return { name: 'Error', message: 'Uncaught ' + text(e), stack: '' };
  } catch (_) {
    return { name: 'Error', message: 'Uncaught exception (unprintable)', stack: '' };
  }
}

// NaN/Infinity would silently become null in JSON: make them visible to the host's validation.
function markNonFinite(r) {
  if (r === null || typeof r !== 'object' || !isArray(r.measurements)) return r;
  var ms = r.measurements, copy = null;
  for (var i = 0; i < ms.length; i++) {
    var m = ms[i];
    if (m === null || typeof m !== 'object') continue;
    var keys = ['channelIndex', 'orderOfMagnitude', 'significand'];
    for (var k = 0; k < keys.length; k++) {
      var v = m[keys[k]];
      if (typeof v === 'number' && !(v - v === 0)) {
        if (copy === null) { copy = ms.slice(); }
        if (copy[i] === m) { var c = {}; var mk = ObjectKeys(m); for (var q = 0; q < mk.length; q++) c[mk[q]] = m[mk[q]]; copy[i] = c; }
        copy[i][keys[k]] = { nonFinite: StringCtor(v) };
      }
    }
  }
  if (copy === null) return r;
  var out = {}, rk = ObjectKeys(r);
  for (var j = 0; j < rk.length; j++) out[rk[j]] = r[rk[j]];
  out.measurements = copy;
  return out;
}

function run(kind, runId, json) {
  var st = { calls: [], logs: [], dropped: 0, cut: 0, errors: [] };
  partial.set(runId, st);
  var out;
  try {
    var args = JSONparse(json);
    var exec;
    if (kind === 'handler') { reviveHandlerArgs(args); exec = handlerExec(st); }
    else { if (kind === 'parser') reviveParserArgs(args); exec = basicExec(st); }
    if (typeof handle !== 'function') throw new TypeErrorCtor('handle is not a function');
    var result = handle(args, exec);
    if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
      out = JSONstringify({ ok: false, invalidResult: true, error: { name: 'TypeError', message: 'handle returned a Promise: it must return its result synchronously', stack: '' }, calls: st.calls, logs: st.logs, errors: errorsOf(st) });
    } else {
      var resultJson;
      try {
        resultJson = JSONstringify(kind === 'parser' ? markNonFinite(result) : result);
      } catch (e) {
          out = JSONstringify({ ok: false, invalidResult: true, error: { name: 'TypeError', message: 'the value returned by handle is not JSON-serialisable: ' + text(e && e.message), stack: '' }, calls: st.calls, logs: st.logs, errors: errorsOf(st) });
      }
      var resultSize = out === undefined && resultJson !== undefined ? overBytes(resultJson, MAX_RESULT_BYTES) : 0;
      if (resultSize > 0) {
        out = JSONstringify({ ok: false, invalidResult: true, error: { name: 'RangeError', message: 'the value returned by handle is ' + resultSize + ' bytes of JSON, over the limit of ' + MAX_RESULT_BYTES + ' (SANDBOX_MAX_RESULT_BYTES)', stack: '' }, calls: st.calls, logs: st.logs, errors: errorsOf(st) });
      }
      if (out === undefined) {
        out = '{"ok":true,"result":' + (resultJson === undefined ? 'null' : resultJson) + ',"calls":' + JSONstringify(st.calls) + ',"logs":' + JSONstringify(st.logs) + ',"errors":' + JSONstringify(errorsOf(st)) + '}';
      }
    }
  } catch (e) {
    out = JSONstringify({ ok: false, error: describe(e), calls: st.calls, logs: st.logs, errors: errorsOf(st) });
  }
  partial.delete(runId);
  return out;
}

// runBatch(kind, firstRunId, jsons, budgetMs) -> outputs: runs of one kind in one call into the isolate (one thread hop
// instead of one per run). \`jsons\` and the result are JSON texts joined by '\n' (JSON text never holds a raw newline).
// It stops after a failed run (the host retires the context, as after a single failed run) and starts no run once
// budgetMs have passed: the host runs what is left in another call.
function runBatch(kind, firstRunId, jsons, budgetMs) {
  var parts = jsons.split('\n'), outs = [], t0 = dateNow();
  for (var i = 0; i < parts.length; i++) {
    if (i > 0 && dateNow() - t0 >= budgetMs) break;
    var out = run(kind, firstRunId + i, parts[i]);
    outs.push(out);
    if (out.lastIndexOf('{"ok":true', 0) !== 0) break;
  }
  return outs.join('\n');
}

function collect(runId) {
  var st = partial.get(runId);
  partial.delete(runId);
  if (!st) return '{"calls":[],"logs":[],"errors":[]}';
  return JSONstringify({ calls: st.calls, logs: st.logs, errors: errorsOf(st) });
}

return { run: run, runBatch: runBatch, collect: collect };
})()`;
