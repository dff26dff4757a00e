// Property-based fuzzing of the REST API: requests generated from the TypeBox schemas of
// every registered route (path parameters, query, body), each value now and then replaced by a
// hostile one (NUL, lone surrogates, huge and fractional numbers, wrong types, deep nesting,
// prototype member names, over-long text). The property: no answer is a 5xx, every error answer is
// a keyed body, and the service still answers an ordinary request at the end.
// Used by test/http/fuzz.test.ts (fixed seed, a few hundred requests) and bench/fuzz.ts (longer).

import fc from 'fast-check';
import type { FastifyInstance, InjectOptions } from 'fastify';
import qs from 'qs';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';
import type { AppContext } from '../../src/app/context.ts';
import { createHttpApp } from '../../src/api/app.ts';
import { registerRoutes } from '../../src/routes.ts';

type Schema = Record<string, unknown>;

export interface FuzzRoute {
  method: string;
  url: string;
  params: string[];
  body?: Schema;
  querystring?: Schema;
}

export interface FuzzRequest {
  route: FuzzRoute;
  params: Record<string, string>;
  query: Record<string, unknown> | null;
  /** a value to send as JSON, or raw JSON text */
  body: { json: unknown } | { raw: string } | null;
}

export interface FuzzOutcome {
  requests: number;
  byStatus: Record<string, number>;
  /** requests answered 5xx or with an unkeyed error body (at most 20 kept) */
  failures: { method: string; url: string; status: number; body: string; payload: string }[];
  routes: number;
}

const LONG = 'x'.repeat(2000);
const HOSTILE_STRINGS = [
  'a\u0000b',
  '\u0000',
  'x\ud800',
  '\udc00',
  '\ud800\ud800',
  '',
  ' ',
  LONG,
  '%00',
  '__proto__',
  'constructor',
  'toString',
  '0000-01-01T00:00:00Z',
  '99999-01-01T00:00:00Z',
  '1e30',
  '-1',
  "'; DROP TABLE device; --",
  '${1}',
  '(a+)+$',
  '[',
  '\\',
];
const HOSTILE_NUMBERS = [1.5, -1, 0, 1e30, -1e30, 1e308, -1e308, 2 ** 53 + 2, -(2 ** 63), 2 ** 31, 0.1];

/**
 * A JSON value nested `depth` levels, kept as a marker until it is written out as text (fast-check
 * and JSON.stringify recurse, and would overflow the stack on the real thing).
 */
class Deep {
  readonly depth: number;
  readonly asObject: boolean;
  constructor(depth: number, asObject: boolean) {
    this.depth = depth;
    this.asObject = asObject;
  }
  json(): string {
    return this.asObject ? '{"a":'.repeat(this.depth) + '1' + '}'.repeat(this.depth) : '['.repeat(this.depth) + '1' + ']'.repeat(this.depth);
  }
  [fc.toStringMethod](): string {
    return `Deep(${this.depth}, ${this.asObject ? 'object' : 'array'})`;
  }
}
const deep = (depth: number, asObject: boolean) => new Deep(depth, asObject);

/** JSON text of a generated value, Deep markers written out in full. */
function toJson(value: unknown): string {
  const parts: string[] = [];
  const text =
    JSON.stringify(value, (_key, v: unknown) => {
      if (!(v instanceof Deep)) return v;
      parts.push(v.json());
      return `\u0001deep${parts.length - 1}\u0001`;
    }) ?? 'null';
  return text.replace(/"\\u0001deep(\d+)\\u0001"/g, (_m, i: string) => parts[Number(i)]);
}

/** A query object with Deep markers replaced by what a query string can nest (qs parses 10 levels). */
const shallow = (value: unknown): unknown =>
  JSON.parse(JSON.stringify(value, (_key, v: unknown) => (v instanceof Deep ? JSON.parse(new Deep(Math.min(v.depth, 15), v.asObject).json()) : v)) ?? 'null');

const protoKeyed = (inner: unknown) => JSON.parse(`{"__proto__": ${JSON.stringify(inner)}, "constructor": {"prototype": {"x": 1}}}`) as unknown;

/** Values no schema asks for. */
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(...HOSTILE_STRINGS),
  fc.constantFrom(...HOSTILE_NUMBERS),
  fc.constantFrom<unknown>(null, true, false, [], {}, [null], { toString: 'x' }, { hasOwnProperty: 1 }),
  fc.constantFrom(40, 200, 3000).chain((d) => fc.constantFrom(deep(d, true), deep(d, false))),
  fc.jsonValue({ maxDepth: 3 }).map(protoKeyed),
  fc.string({ unit: 'binary', maxLength: 20 }),
);

const anyJson = fc.jsonValue({ maxDepth: 3 });

/**
 * An arbitrary for the values `schema` allows (bounded in size); most of them then get one node
 * (any member or item, or the whole value) replaced by a hostile value, so that the poison sits
 * in an otherwise valid request and reaches the code behind validation.
 */
export function valueFor(schema: Schema | undefined, pool: string[]): fc.Arbitrary<unknown> {
  const valid = validFor(schema ?? {}, pool);
  return fc.oneof(
    { weight: 2, arbitrary: valid },
    { weight: 5, arbitrary: fc.tuple(valid, fc.nat(), hostileValue).map(([value, n, poison]) => replaceNode(value, n, poison)) },
  );
}

/** `value` with its node number `n` (pre-order, modulo the node count) replaced by `poison`; a member name now and then poisoned instead. */
function replaceNode(value: unknown, n: number, poison: unknown): unknown {
  const root = { v: structuredClone(value) as unknown };
  const slots: [Record<string, unknown> | unknown[], string | number][] = [];
  const stack: [Record<string, unknown> | unknown[], string | number][] = [[root as Record<string, unknown>, 'v']];
  while (stack.length > 0) {
    const slot = stack.pop() as [Record<string, unknown>, string];
    slots.push(slot);
    const v = slot[0][slot[1]];
    if (Array.isArray(v)) v.forEach((_x, i) => stack.push([v, i]));
    else if (v !== null && typeof v === 'object' && !(v instanceof Deep)) for (const k of Object.keys(v)) stack.push([v as Record<string, unknown>, k]);
  }
  const [parent, key] = slots[n % slots.length];
  if (typeof key === 'string' && key !== 'v' && typeof poison === 'string' && n % 5 === 0) {
    // the member name is the poison
    const p = parent as Record<string, unknown>;
    p[poison] = p[key];
    delete p[key];
  } else {
    (parent as Record<string, unknown>)[key as string] = poison;
  }
  return root.v;
}

function validFor(schema: Schema, pool: string[]): fc.Arbitrary<unknown> {
  const sub = (s: unknown) => validFor(s as Schema, pool);
  if (Array.isArray(schema.anyOf)) return fc.oneof(...(schema.anyOf as Schema[]).map((s) => validFor(s, pool)));
  if (Array.isArray(schema.allOf) && schema.allOf.length > 0) return validFor(schema.allOf[0] as Schema, pool);
  if ('const' in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      const required = new Set((schema.required ?? []) as string[]);
      const members = Object.fromEntries(Object.entries(properties).map(([k, s]) => [k, sub(s)]));
      const known = fc.record(members, { requiredKeys: Object.keys(properties).filter((k) => required.has(k)) });
      if (schema.additionalProperties === false) return known;
      // a record of free members (device fields, translations)
      const extra = fc.dictionary(
        fc.string({ maxLength: 8 }),
        schema.additionalProperties && typeof schema.additionalProperties === 'object' ? sub(schema.additionalProperties) : anyJson,
        { maxKeys: 3 },
      );
      return fc.tuple(known, extra).map(([k, e]) => ({ ...(e as object), ...(k as object) }));
    }
    case 'array': {
      const maxLength = Math.min(Number(schema.maxItems ?? 4), 4);
      const minLength = Math.min(Number(schema.minItems ?? 0), maxLength);
      return fc.array(sub(schema.items ?? {}), { minLength, maxLength });
    }
    case 'string': {
      if (schema.format === 'date-time')
        return fc.date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());
      if (typeof schema.pattern === 'string' && /\[a-zA-Z0-9\]/.test(schema.pattern)) {
        return pool.length > 0 ? fc.oneof(fc.constantFrom(...pool), fc.stringMatching(/^[a-z0-9]{10}$/)) : fc.stringMatching(/^[a-z0-9]{10}$/);
      }
      if (typeof schema.pattern === 'string') return fc.stringMatching(new RegExp(schema.pattern)).filter((s) => s.length <= 600);
      const maxLength = Math.min(Number(schema.maxLength ?? 40), 40);
      const minLength = Math.min(Number(schema.minLength ?? 0), maxLength);
      return fc.string({ minLength, maxLength });
    }
    case 'integer': {
      const min = Math.max(Number(schema.minimum ?? -1e6), -1e9);
      const max = Math.min(Number(schema.maximum ?? 1e6), 1e9);
      return fc.integer({ min: Math.ceil(min), max: Math.floor(max) });
    }
    case 'number':
      return fc.double({ min: Number(schema.minimum ?? -1e9), max: Number(schema.maximum ?? 1e9), noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    default:
      return anyJson;
  }
}

/** An arbitrary request to one of `routes`; hashId-like parameters come from `pool` (objects that exist) or are random. */
export function requestArbitrary(routes: FuzzRoute[], pool: string[]): fc.Arbitrary<FuzzRequest> {
  return fc.constantFrom(...routes).chain((route) => {
    const params = fc.record(
      Object.fromEntries(
        route.params.map((p) => [
          p,
          fc.oneof(
            { weight: 4, arbitrary: pool.length > 0 ? fc.constantFrom(...pool) : fc.constant('nosuchobject') },
            { weight: 1, arbitrary: fc.oneof(fc.constantFrom('a\u0000b', '__proto__', 'constructor', LONG, '..', '%', '0'), fc.string({ maxLength: 12 })) },
          ),
        ]),
      ),
    );
    const query = route.querystring ? fc.option(valueFor(route.querystring, pool), { freq: 6 }) : fc.constant(null);
    const body =
      route.body === undefined
        ? fc.constant(null)
        : fc.oneof(
            { weight: 12, arbitrary: valueFor(route.body, pool).map((json) => ({ json })) },
            { weight: 1, arbitrary: fc.constantFrom(20_000, 5_000).map((d) => ({ raw: `{"a":${'['.repeat(d)}${']'.repeat(d)}}` })) },
            {
              weight: 1,
              arbitrary: fc
                .constantFrom('{', '{"a":"\\ud800"}', '{"a":"\\u0000"}', '{"__proto__":{"x":1}}', '1e999', 'null', '[]', '"x"')
                .map((raw) => ({ raw })),
            },
          );
    return fc.record({ route: fc.constant(route), params, query, body }) as fc.Arbitrary<FuzzRequest>;
  });
}

/** qs as axios sends it; text that is not well-formed Unicode cannot be percent-encoded, so it goes repaired. */
const encodeQuery = (query: unknown) =>
  qs.stringify(query, {
    encoder: (s: unknown, defaultEncoder: (v: unknown) => string) => defaultEncoder(typeof s === 'string' ? s.toWellFormed() : s),
  });

function injectOptions(request: FuzzRequest, headers: Record<string, string>): InjectOptions {
  const path = request.route.url.replace(/:(\w+)/g, (_m, name: string) => encodeURIComponent((request.params[name] ?? 'x').toWellFormed()));
  const query = request.query !== null && typeof request.query === 'object' ? encodeQuery(shallow(request.query)) : '';
  const options: InjectOptions = { method: request.route.method as 'GET', url: query ? `${path}?${query}` : path, headers: { ...headers } };
  if (request.body !== null) {
    options.headers = { ...options.headers, 'content-type': 'application/json' };
    options.payload = 'raw' in request.body ? request.body.raw : toJson(request.body.json);
  }
  return options;
}

const HANDLER = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  return { statusCode: 204 };
}`;
const PARSER = `function handle(args: { payload: string }, exec: Exec) {
  return { generatedAt: new Date(), measurements: [] };
}`;
const IDENTIFIER = `function handle(args: { request: WebRequest }): { deviceTypeHashId: string; deviceIdentifier: string } {
  return { deviceTypeHashId: 'x', deviceIdentifier: 'y' };
}`;

type Send = (method: string, url: string, body?: unknown) => Promise<unknown>;

/** One object of each kind in a connectivity environment, with fields that have a regex and any JSON; their hashIds. */
export async function provisionConnectivity(send: Send): Promise<string[]> {
  const hashIdOf = (answer: unknown) => (answer as { hashId?: string } | null)?.hashId;
  const field = (key: string, type: string, more: Record<string, unknown> = {}) => ({ key, name: key, type, ...more });
  const quantity = hashIdOf(await send('POST', '/quantity/', { name: 'Temperature', unit: 'K', defaultOrderOfMagnitude: 0 }));
  const commandType = hashIdOf(await send('POST', '/command-type/', { name: 'Cycle', fieldConfigurations: [field('interval', 'integer')] }));
  const deviceType = hashIdOf(
    await send('POST', '/device-type/', {
      name: 'Fuzzed',
      eventHandler: HANDLER,
      fieldConfigurations: [field('serial', 'string', { regex: '^[a-z]+$' }), field('doc', 'json')],
      pinGroupFieldConfigurations: [],
      channels: [{ name: 'wire', pinFieldConfigurations: [] }],
      commandTypeHashIds: commandType ? [commandType] : [],
    }),
  );
  const device = deviceType
    ? hashIdOf(
        await send('POST', '/device/psk', {
          supplierDeviceIdentifier: 'fuzz-1',
          deviceTypeHashId: deviceType,
          psk: '00112233445566778899aabbccddeeff',
          pskIdentity: `fuzz-${Date.now()}-${Math.random()}`,
        }),
      )
    : undefined;
  const reportType = hashIdOf(
    await send('POST', '/supplier-report-type/', { name: 'Report', fieldConfigurations: { pinGroup: [], pin: [], measurement: [] }, parser: PARSER }),
  );
  const webhook = hashIdOf(await send('POST', '/supplier-webhook/', { name: 'Hook', identifier: IDENTIFIER }));
  const counterKey = hashIdOf(await send('POST', '/device-connectivity-counter-key/', { name: 'Messages' }));
  const command =
    device && commandType
      ? hashIdOf(await send('POST', '/command/', { commandTypeHashId: commandType, deviceHashId: device, fields: { interval: 5 } }))
      : undefined;
  return [quantity, commandType, deviceType, device, reportType, webhook, counterKey, command].filter((h): h is string => typeof h === 'string');
}

export interface FuzzApi {
  app: FastifyInstance;
  routes: FuzzRoute[];
  /** hashIds of objects that exist in the fuzzed environment */
  pool: string[];
  headers: Record<string, string>;
  close(): Promise<void>;
}

const SELF_DELETES = new Set(['/environment/', '/environment', '/supplier/', '/supplier']);

/** The REST API with every route, its routes' schemas, and a connectivity environment with one object of each kind. */
export async function startFuzzApi(ctx: AppContext): Promise<FuzzApi> {
  const app = await createHttpApp(ctx);
  const routes: FuzzRoute[] = [];
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const schema = (route.schema ?? {}) as { body?: Schema; querystring?: Schema };
    for (const method of methods) {
      if (method === 'HEAD') continue;
      // deleting the fuzzed environment (or supplier) itself would leave every later request a 401: those two are tested on their own
      if (method === 'DELETE' && SELF_DELETES.has(route.url)) continue;
      // a server-sent event stream (GET /supplier-activity/stream, /issue/stream) answers a valid request with a body that
      // never ends, so inject would wait for ever: their inputs are tested in their own files (live-log, customer)
      if (route.url.endsWith('/stream')) continue;
      routes.push({
        method,
        url: route.url,
        params: [...route.url.matchAll(/:(\w+)/g)].map((m) => m[1]),
        body: schema.body ?? (method === 'POST' || method === 'PUT' ? {} : undefined),
        querystring: schema.querystring,
      });
    }
  });
  await registerRoutes(app, ctx);
  await app.ready();
  const env = await createEnvironment(ctx.db, 'connectivity', 'fuzz');
  const account = await createMachineAccount(ctx.db, env.hashId, ['ENVIRONMENT_ADMIN']);
  const login = await app.inject({
    method: 'POST',
    url: '/authentication/machine-login',
    headers: { 'api-version': '5' },
    payload: { assertion: account.assertion },
  });
  const headers = { 'api-version': '5', 'environment-hash-id': env.hashId, authorization: `Bearer ${(login.json() as { jwt: string }).jwt}` };
  const pool = await provisionConnectivity(async (method, url, body) => {
    const res = await app.inject({ method: method as 'POST', url, headers, ...(body === undefined ? {} : { payload: body as object }) });
    return res.body ? res.json() : null;
  });
  pool.push(env.hashId);
  return { app, routes, pool, headers, close: () => app.close() };
}

/** Runs `numRuns` generated requests with `seed`; never throws for a 5xx, it reports it. */
export async function fuzz(api: FuzzApi, options: { seed: number; numRuns: number; onRequest?: (status: number) => void }): Promise<FuzzOutcome> {
  const outcome: FuzzOutcome = { requests: 0, byStatus: {}, failures: [], routes: api.routes.length };
  await fc.assert(
    fc.asyncProperty(requestArbitrary(api.routes, api.pool), async (request) => {
      const options = injectOptions(request, api.headers);
      let res: Awaited<ReturnType<FastifyInstance['inject']>>;
      try {
        res = await api.app.inject(options);
      } catch (err) {
        outcome.failures.push({
          method: String(options.method),
          url: String(options.url).slice(0, 300),
          status: 0,
          body: (err as Error).message,
          payload: String(options.payload ?? '').slice(0, 300),
        });
        return true;
      }
      outcome.requests++;
      outcome.byStatus[res.statusCode] = (outcome.byStatus[res.statusCode] ?? 0) + 1;
      let keyed = res.statusCode < 400;
      if (!keyed) {
        try {
          keyed = typeof (res.json() as { key?: unknown }).key === 'string';
        } catch {
          keyed = false;
        }
      }
      const ok = res.statusCode < 500 && keyed;
      if (!ok && outcome.failures.length < 20) {
        outcome.failures.push({
          method: String(options.method),
          url: String(options.url).slice(0, 300),
          status: res.statusCode,
          body: res.body.slice(0, 300),
          payload: String(options.payload ?? '').slice(0, 300),
        });
      }
      return true;
    }),
    { seed: options.seed, numRuns: options.numRuns, endOnFailure: true },
  );
  return outcome;
}
