// Whether a failure says a store is away (PostgreSQL down or restarting, the monitoring core unreachable, Redis
// reconnecting) rather than that what was asked of it is wrong. The pipeline waits such failures out
// (src/pipeline/failures.ts); the API answers them 503 unavailable_error (src/http/errors.ts).

/** A store that did not take the write: retried until it does. */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
}

/** SQLSTATE classes and codes of a server that is away or busy, not of a statement that is wrong. */
const TRANSIENT_SQLSTATE = /^(08|53|58|57P0[1-5]|40001|40P01|55P03|55006)/;
/** Node's socket errors, undici's and ioredis' connection errors. */
const TRANSIENT_NODE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ECONNABORTED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);
/** node-postgres and ioredis say these in words only. */
const TRANSIENT_MESSAGES = [
  /Connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /Client has encountered a connection error/i,
  /Client was closed and is not queryable/i,
  /Cannot use a pool after calling end/i,
  /Connection is closed/i,
  /the database system is (starting up|shutting down|not yet accepting connections|in recovery mode)/i,
  /Reached the max retries per request limit/i,
];

/** Whether `err` says a store is unavailable rather than that the job's data is wrong. */
export function isTransient(err: unknown, depth = 0): boolean {
  if (depth > 4 || err === null || typeof err !== 'object') return false;
  if (err instanceof StoreUnavailableError) return true;
  const { code, message, errors, cause } = err as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown };
  if (typeof code === 'string' && (TRANSIENT_NODE_CODES.has(code) || (code.length === 5 && TRANSIENT_SQLSTATE.test(code)))) return true;
  if (typeof message === 'string' && TRANSIENT_MESSAGES.some((re) => re.test(message))) return true;
  // a connect to localhost tries ::1 and 127.0.0.1 and reports both
  if (Array.isArray(errors) && errors.length > 0 && errors.every((e) => isTransient(e, depth + 1))) return true;
  return cause !== undefined && isTransient(cause, depth + 1);
}
