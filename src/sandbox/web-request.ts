import type { Json, WebRequest, WebRequestBody } from './types.ts';

/**
 * The deepest JSON a device body is parsed into: the job's serialisation, the copy into the sandbox and the activity
 * log walk it recursively, and a body nested 32,000 levels deep (64 KB) overflowed the stack after it was queued.
 * Deeper JSON is handed to the handler as the text it is, like JSON that does not parse.
 */
export const MAX_JSON_DEPTH = 64;

/** Whether the JSON text nests arrays and objects deeper than `max` (one pass; brackets inside strings do not count). */
function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** Body typing shared by every listener: JSON → json, text → string, anything else → hex. */
export function typedBody(payload: Buffer, contentType: string | undefined): WebRequestBody | undefined {
  if (payload.length === 0) return undefined;
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/json' || type.endsWith('+json') || type === 'text/json') {
    const text = payload.toString('utf8');
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) return { type: 'string', data: text };
    try {
      return { type: 'json', data: JSON.parse(text) as Json };
    } catch {
      return { type: 'string', data: text };
    }
  }
  if (type.startsWith('text/')) return { type: 'string', data: payload.toString('utf8') };
  return { type: 'hex', data: payload.toString('hex') };
}

/** Splits `a=1&b=2&b=3` (or key/value pairs, as CoAP's Uri-Query options give them) into the WebRequest query (repeated keys become arrays). */
export function parseQuery(search: URLSearchParams | Iterable<[string, string]>): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  for (const [key, value] of search) {
    const prev = query[key];
    query[key] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return query;
}

export function webRequest(parts: Omit<WebRequest, 'certificate'> & { certificate?: WebRequest['certificate'] }): WebRequest {
  return { certificate: null, ...parts };
}

/** The answer's body as bytes and its content type. */
export function encodeAnswerBody(body: { type: 'json' | 'string' | 'hex'; data: unknown } | null): { payload: Buffer; contentType: string | null } {
  if (!body) return { payload: Buffer.alloc(0), contentType: null };
  switch (body.type) {
    case 'hex':
      return { payload: Buffer.from(String(body.data), 'hex'), contentType: 'application/octet-stream' };
    case 'string':
      return { payload: Buffer.from(String(body.data), 'utf8'), contentType: 'text/plain; charset=utf-8' };
    default:
      return { payload: Buffer.from(JSON.stringify(body.data ?? null), 'utf8'), contentType: 'application/json' };
  }
}
