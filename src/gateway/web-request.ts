import type { Json, WebRequest, WebRequestBody } from '../sandbox/types.ts';
import type { DeviceAnswer } from '../pipeline/jobs.ts';

/** Body typing shared by every listener: JSON → json, text → string, anything else → hex. */
export function typedBody(payload: Buffer, contentType: string | undefined): WebRequestBody | undefined {
  if (payload.length === 0) return undefined;
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/json' || type.endsWith('+json') || type === 'text/json') {
    try {
      return { type: 'json', data: JSON.parse(payload.toString('utf8')) as Json };
    } catch {
      return { type: 'string', data: payload.toString('utf8') };
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
export function encodeAnswerBody(body: DeviceAnswer['body']): { payload: Buffer; contentType: string | null } {
  if (!body) return { payload: Buffer.alloc(0), contentType: null };
  switch (body.type) {
    case 'hex': return { payload: Buffer.from(String(body.data), 'hex'), contentType: 'application/octet-stream' };
    case 'string': return { payload: Buffer.from(String(body.data), 'utf8'), contentType: 'text/plain; charset=utf-8' };
    default: return { payload: Buffer.from(JSON.stringify(body.data ?? null), 'utf8'), contentType: 'application/json' };
  }
}
