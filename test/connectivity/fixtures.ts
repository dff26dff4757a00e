import { expect } from 'vitest';
import type { ApiClient } from '../helpers.ts';

export interface ErrorBody {
  key: string;
  message: string;
  details?: unknown;
}

/** A 400 parameter_error whose message names each of `words` (the field and its limit). */
export function expectParameterError(r: { status: number; body: unknown }, ...words: string[]): void {
  expect(r.status).toBe(400);
  const body = r.body as ErrorBody;
  expect(body.key).toBe('parameter_error');
  for (const w of words) expect(body.message).toContain(w);
}

/** A valid event handler in the style suppliers write. */
export const EVENT_HANDLER = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  return { statusCode: 204 };
}
`;

export const PARSER = `function handle(args: { payload: string }, exec: Exec) {
  const data = JSON.parse(args.payload) as { t: number };
  return { generatedAt: new Date(), measurements: [{ channelIndex: 0, quantityHashId: 'q1', generatedAt: new Date(), orderOfMagnitude: -2, significand: Math.round(data.t * 100) }] };
}
`;

export const field = (key: string, type = 'string', more: Record<string, unknown> = {}) => ({ key, name: key, type, ...more });

export function deviceTypeBody(overrides: Record<string, unknown> = {}) {
  return {
    name: 'Cathodic protection device',
    eventHandler: EVENT_HANDLER,
    fieldConfigurations: [field('serial'), field('depth', 'number'), field('count', 'integer'), field('active', 'boolean')],
    pinGroupFieldConfigurations: [],
    channels: [
      { name: 'Red wire', pinFieldConfigurations: [] },
      { name: 'Black wire', pinFieldConfigurations: [] },
    ],
    commandTypeHashIds: [],
    ...overrides,
  };
}

export async function addDeviceType(client: ApiClient, overrides: Record<string, unknown> = {}): Promise<string> {
  const r = await client.request<{ hashId: string }>('POST', '/device-type/', deviceTypeBody(overrides));
  if (r.status !== 200) throw new Error(`device type add failed: ${JSON.stringify(r.body)}`);
  return r.body.hashId;
}

/** Every row of a find, following nextPageOffset; `url` may carry its own query. */
export async function findAll<T>(client: ApiClient, url: string, rowsPerPage = 2): Promise<T[]> {
  const rows: T[] = [];
  let offset: string | null = null;
  const sep = url.includes('?') ? '&' : '?';
  do {
    const page: { status: number; body: { nextPageOffset: string | null; rows: T[] } } = await client.request(
      'GET',
      `${url}${sep}rowsPerPage=${rowsPerPage}${offset ? `&offset=${offset}` : ''}`,
    );
    if (page.status !== 200) throw new Error(`find failed: ${JSON.stringify(page.body)}`);
    if (page.body.rows.length > rowsPerPage) throw new Error('page too long');
    rows.push(...page.body.rows);
    offset = page.body.nextPageOffset;
  } while (offset);
  return rows;
}

export function commandTypeBody(overrides: Record<string, unknown> = {}) {
  return { name: 'Measurement cycle', fieldConfigurations: [field('interval', 'integer')], ...overrides };
}

export async function addCommandType(client: ApiClient, overrides: Record<string, unknown> = {}): Promise<string> {
  const r = await client.request<{ hashId: string }>('POST', '/command-type/', commandTypeBody(overrides));
  if (r.status !== 200) throw new Error(`command type add failed: ${JSON.stringify(r.body)}`);
  return r.body.hashId;
}
