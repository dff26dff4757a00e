// Host-side validation/normalisation of what supplier code returned (already JSON: dates are
// ISO strings; non-finite numbers in measurements arrive as { nonFinite: 'NaN' | 'Infinity' ... }).

import { reportDateProblem } from './report-dates.ts';
import type { IdentifierResult, IncomingRequestResponse, Json, ParsedMeasurement, ParsedReport, TypedBody } from './types.ts';

/** `notes`: lines for the run's log; `errors`: error lines (something refused, the rest accepted). */
export type Validation<T> = { ok: true; value: T; notes: string[]; errors?: string[] } | { ok: false; message: string };

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;
const ROUNDING_TOLERANCE = 1e-6;

function show(v: unknown): string {
  if (v !== null && typeof v === 'object' && 'nonFinite' in v) return String((v as { nonFinite: unknown }).nonFinite);
  if (v === undefined) return 'undefined';
  try {
    const s = JSON.stringify(v);
    return s.length > 60 ? `${s.slice(0, 60)}…` : s;
  } catch {
    return String(v);
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** A date as returned by supplier code: a Date (serialised to an ISO string), a date string, or epoch ms. */
function toIso(v: unknown): string | null {
  if (typeof v !== 'string' && typeof v !== 'number') return null;
  const d = new Date(v);
  return Number.isFinite(d.getTime()) ? d.toISOString() : null;
}

/**
 * Validates a report parser's return value (UDF-CONTRACT §4).
 *
 * `generatedAt` is required by the contract; when it is missing (undefined/null) we use the time
 * of the run instead of failing the parse, and say so in a note (the runner adds notes to the
 * run's log). A present but invalid generatedAt fails the parse, and so does a report's or a
 * measurement's time outside the window every report's time is kept in (src/sandbox/report-dates.ts).
 */
export function validateParsedReport(raw: unknown, runAt: Date): Validation<ParsedReport> {
  const notes: string[] = [];
  if (!isPlainObject(raw)) return { ok: false, message: `the parser must return an object, got ${show(raw)}` };

  let generatedAt: string;
  if (raw.generatedAt === undefined || raw.generatedAt === null) {
    generatedAt = runAt.toISOString();
    notes.push(`generatedAt missing in the parser's result: using the time of the run, ${generatedAt}`);
  } else {
    const iso = toIso(raw.generatedAt);
    if (iso === null) return { ok: false, message: `generatedAt ${show(raw.generatedAt)} is not a valid date` };
    const outside = reportDateProblem(new Date(iso), runAt);
    if (outside) return { ok: false, message: `generatedAt ${iso} ${outside}` };
    generatedAt = iso;
  }

  if (!Array.isArray(raw.measurements)) {
    return { ok: false, message: `measurements must be an array, got ${show(raw.measurements)}` };
  }
  const measurements: ParsedMeasurement[] = [];
  for (let i = 0; i < raw.measurements.length; i++) {
    const m: unknown = raw.measurements[i];
    const at = `measurements[${i}]`;
    if (!isPlainObject(m)) return { ok: false, message: `${at} must be an object, got ${show(m)}` };

    const { channelIndex, quantityHashId, orderOfMagnitude, significand } = m;
    if (typeof channelIndex !== 'number' || !Number.isInteger(channelIndex) || channelIndex < 0 || channelIndex > INT32_MAX) {
      return { ok: false, message: `${at}.channelIndex ${show(channelIndex)} is not an integer >= 0` };
    }
    if (typeof quantityHashId !== 'string' || quantityHashId.length === 0) {
      return { ok: false, message: `${at}.quantityHashId ${show(quantityHashId)} is not a non-empty string` };
    }
    let mGeneratedAt = generatedAt;
    if (m.generatedAt !== undefined && m.generatedAt !== null) {
      const iso = toIso(m.generatedAt);
      if (iso === null) return { ok: false, message: `${at}.generatedAt ${show(m.generatedAt)} is not a valid date` };
      const outside = reportDateProblem(new Date(iso), runAt);
      if (outside) return { ok: false, message: `${at}.generatedAt ${iso} ${outside}` };
      mGeneratedAt = iso;
    }
    if (typeof orderOfMagnitude !== 'number' || !Number.isInteger(orderOfMagnitude)) {
      return { ok: false, message: `${at}.orderOfMagnitude ${show(orderOfMagnitude)} is not an integer` };
    }
    if (orderOfMagnitude < -128 || orderOfMagnitude > 127) {
      return { ok: false, message: `${at}.orderOfMagnitude ${orderOfMagnitude} is out of range -128..127` };
    }
    if (typeof significand !== 'number' || !Number.isFinite(significand)) {
      return { ok: false, message: `${at}.significand ${show(significand)} is not a finite number` };
    }
    const rounded = Math.round(significand);
    if (Math.abs(significand - rounded) > ROUNDING_TOLERANCE) {
      return { ok: false, message: `${at}.significand ${significand} is not an integer` };
    }
    if (rounded < INT32_MIN || rounded > INT32_MAX) {
      return { ok: false, message: `${at}.significand ${rounded} is out of the signed 32-bit range` };
    }
    measurements.push({
      channelIndex,
      quantityHashId,
      generatedAt: mGeneratedAt,
      orderOfMagnitude,
      significand: rounded === 0 ? 0 : rounded, // no -0
    });
  }

  const report: ParsedReport = { generatedAt, measurements };
  if (raw.fields !== undefined && raw.fields !== null) {
    if (!isPlainObject(raw.fields)) return { ok: false, message: `fields must be an object, got ${show(raw.fields)}` };
    report.fields = raw.fields;
  }
  return { ok: true, value: report, notes };
}

const HEX_RE = /^(?:[0-9a-fA-F]{2})*$/;

function typedBodyOf(body: unknown): TypedBody | string {
  if (isPlainObject(body) && (body.type === 'hex' || body.type === 'string' || body.type === 'json') && 'data' in body && Object.keys(body).length === 2) {
    if (body.type === 'json') return { type: 'json', data: body.data as Json };
    if (typeof body.data !== 'string') return `body.data must be a string for body type '${body.type}'`;
    if (body.type === 'hex' && !HEX_RE.test(body.data)) return 'body.data is not an even-length hex string';
    return { type: body.type, data: body.data };
  }
  return { type: 'json', data: body as Json };
}

// RFC 9110 token; a value may hold visible characters, spaces and tabs (no CR, LF, NUL: they would end or split the header)
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
// the gateway frames the answer itself: a handler's own framing headers would contradict it
const FRAMING_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'trailer', 'te']);

/** Bytes of a typed body as it is sent. */
export function bodyBytes(body: TypedBody): number {
  if (body.type === 'hex') return body.data.length / 2;
  if (body.type === 'string') return Buffer.byteLength(body.data);
  return Buffer.byteLength(JSON.stringify(body.data) ?? '');
}

/**
 * Validates the handler's answer to an incomingRequest event. `undefined`/`null` (the handler
 * returned nothing) is valid and gives `null`: the pipeline picks the default answer. A body over
 * `maxBodyBytes` fails the run; a header that cannot be sent (CR/LF in it, a name that is no token)
 * is refused with an error line and the rest of the answer stands.
 */
export function validateIncomingRequestResponse(raw: unknown, maxBodyBytes = Infinity): Validation<IncomingRequestResponse | null> {
  if (raw === undefined || raw === null) return { ok: true, value: null, notes: [] };
  if (!isPlainObject(raw)) return { ok: false, message: `the handler must return { statusCode, headers?, body? }, got ${show(raw)}` };
  const { statusCode } = raw;
  if (typeof statusCode !== 'number' || !Number.isInteger(statusCode) || statusCode < 100 || statusCode > 599) {
    return { ok: false, message: `statusCode ${show(statusCode)} is not an integer in 100..599` };
  }
  const headers: Record<string, string> = {};
  const errors: string[] = [];
  if (raw.headers !== undefined && raw.headers !== null) {
    if (!isPlainObject(raw.headers)) return { ok: false, message: `headers must be an object, got ${show(raw.headers)}` };
    for (const [name, value] of Object.entries(raw.headers)) {
      if (typeof value !== 'string') return { ok: false, message: `headers[${JSON.stringify(name)}] ${show(value)} is not a string` };
      if (!HEADER_NAME.test(name)) errors.push(`header ${show(name)} refused: a header name is a token (letters, digits and !#$%&'*+.^_\`|~-)`);
      else if (FRAMING_HEADERS.has(name.toLowerCase())) errors.push(`header ${show(name)} refused: the gateway sets it for the answer it sends`);
      else if (!HEADER_VALUE.test(value))
        errors.push(`header ${show(name)} refused: its value ${show(value)} holds CR, LF or another character a header cannot carry`);
      else headers[name] = value;
    }
  }
  let body: TypedBody | null = null;
  if (raw.body !== undefined && raw.body !== null) {
    const typed = typedBodyOf(raw.body);
    if (typeof typed === 'string') return { ok: false, message: typed };
    body = typed;
    const bytes = bodyBytes(body);
    if (bytes > maxBodyBytes)
      return { ok: false, message: `the answer's body is ${bytes} bytes, over the limit of ${maxBodyBytes} (SANDBOX_MAX_ANSWER_BYTES)` };
  }
  return { ok: true, value: { statusCode, headers, body }, notes: [], ...(errors.length > 0 ? { errors } : {}) };
}

/** Validates a webhook/certificate identifier's return value. */
export function validateIdentifierResult(raw: unknown): Validation<IdentifierResult> {
  if (!isPlainObject(raw)) return { ok: false, message: `the identifier must return { deviceTypeHashId, deviceIdentifier }, got ${show(raw)}` };
  const { deviceTypeHashId, deviceIdentifier } = raw;
  if (typeof deviceTypeHashId !== 'string' || deviceTypeHashId.length === 0) {
    return { ok: false, message: `deviceTypeHashId ${show(deviceTypeHashId)} is not a non-empty string` };
  }
  if (typeof deviceIdentifier !== 'string' || deviceIdentifier.length === 0) {
    return { ok: false, message: `deviceIdentifier ${show(deviceIdentifier)} is not a non-empty string` };
  }
  return { ok: true, value: { deviceTypeHashId, deviceIdentifier }, notes: [] };
}
