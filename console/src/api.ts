// The console's client of the REST API: the same routes the SDK uses, authenticated by the session cookie
// (src/accounts/people/), with the header that tells a cross-site form from the console (CSRF defence).

export const API_VERSION = 8;

/** An error answer of the API: {key, message} and its status. */
export class ApiError extends Error {
  readonly status: number;
  readonly key: string;
  readonly details: unknown;
  constructor(status: number, key: string, message: string, details?: unknown) {
    super(message);
    this.status = status;
    this.key = key;
    this.details = details;
  }
}

let environmentHeader: string | null = null;
let onSignedOut: (() => void) | null = null;

/** The environment every call names (Environment-Hash-Id): `supplier:<hashId>` for a connectivity environment. */
export function useEnvironment(env: { hashId: string; type: string } | null): void {
  environmentHeader = env === null ? null : env.type === 'connectivity' ? `supplier:${env.hashId}` : env.hashId;
}

/** Called when the API answers 401 to a signed-in page: the session ended (idle, absolute expiry, signed out elsewhere). */
export function whenSignedOut(fn: () => void): void {
  onSignedOut = fn;
}

export interface RequestOptions {
  query?: Record<string, unknown>;
  body?: unknown;
  /** a route outside the signed-in area (sign-in, password set): a 401 is its answer, not a lost session */
  anonymous?: boolean;
  signal?: AbortSignal;
}

/** Bracket notation as the SDK sends it (`rows[0]=a`, `filter[key]=v`); null and undefined are left out. */
export function queryString(query: Record<string, unknown>): string {
  const parts: string[] = [];
  const add = (key: string, value: unknown) => {
    if (value === undefined || value === null) return;
    if (Array.isArray(value)) value.forEach((v, i) => add(`${key}[${i}]`, v));
    else if (value instanceof Date) parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(value.toISOString())}`);
    else if (typeof value === 'object') for (const [k, v] of Object.entries(value)) add(`${key}[${k}]`, v);
    else parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`);
  };
  for (const [k, v] of Object.entries(query)) add(k, v);
  return parts.length ? `?${parts.join('&')}` : '';
}

export async function api<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
  const headers: Record<string, string> = { 'Api-Version': String(API_VERSION), 'X-Gridgate-Console': '1', Accept: 'application/json' };
  if (environmentHeader && !options.anonymous) headers['Environment-Hash-Id'] = environmentHeader;
  if (options.body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path + queryString(options.query ?? {}), {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    credentials: 'same-origin',
    signal: options.signal,
  });
  if (response.status === 204) return undefined as T;
  const type = response.headers.get('content-type') ?? '';
  const payload: unknown = type.includes('json') ? await response.json() : await response.text();
  if (!response.ok) {
    const err = (payload ?? {}) as { key?: string; message?: string; details?: unknown };
    if (response.status === 401 && !options.anonymous && onSignedOut) onSignedOut();
    throw new ApiError(
      response.status,
      err.key ?? 'error',
      err.message ?? (typeof payload === 'string' && payload ? payload : `HTTP ${response.status}`),
      err.details,
    );
  }
  return payload as T;
}

/** Every row of a find operation, page after page (the SDK's nextPageOffset), at most `max`. */
export async function findAll<R>(path: string, query: Record<string, unknown> = {}, max = 1000): Promise<R[]> {
  const rows: R[] = [];
  let offset: string | null | undefined;
  do {
    const page = await api<{ rows: R[]; nextPageOffset: string | null }>('GET', path, { query: { ...query, offset: offset ?? undefined } });
    rows.push(...page.rows);
    offset = page.nextPageOffset;
  } while (offset && rows.length < max);
  return rows;
}

/** A server-sent event stream of a route (EventSource cannot send headers: the route takes them as query parameters). */
export function eventStream(path: string, query: Record<string, unknown> = {}): EventSource {
  return new EventSource(path + queryString({ ...query, apiVersion: API_VERSION, environmentHashId: environmentHeader ?? undefined }), {
    withCredentials: true,
  });
}
