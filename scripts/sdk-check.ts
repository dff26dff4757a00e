// Drives every route of a build of the original SDK (@withthegrid/platform-sdk, built as CommonJS)
// against a running service and prints one row per route: the HTTP status and whether the answer
// passed the SDK's own response validation. Not part of `npm test`: the project's tests stay
// independent of the SDK. Usage (docs/walkthrough.md):
//
//   node scripts/sdk-check.ts --url http://127.0.0.1:8080 --sdk /tmp/sdk18/cjs \
//     --monitoring <assertion> --connectivity <assertion>
//   node scripts/sdk-check.ts --url http://127.0.0.1:8080 --sdk /tmp/sdk17/cjs --provision
//
// --provision makes a monitoring and a connectivity environment with an all-rights machine account
// each through the admin CLI (`npm run admin`, with this shell's configuration). The SDK's own
// Api-Version is sent (18.x: 8, 17.x: 5) unless --api-version names another (the SDK then also
// validates with that version's schemas). Requests are made from the SDK's Joi schemas (their
// examples, or the least value each type allows) with the hashIds of objects the run created or
// found in place of the examples' hashIds, patched where no example can be valid (PATCHES). Adds
// run first (those others name before them), then prepareWorld makes what no route can (devices
// with a PSK, one claimed, a claim token, a webhook request's activity, a second quantity), then
// reads and updates, deletes (held objects before their holders), two-factor authentication and
// login, and the environments' own delete last. The summary counts calls, 2xx answers, 404 No
// operation, answers that passed the SDK's validation, expected errors (EXPECTED), answers that
// failed it and other errors, with route names; it exits 1 unless the last three are none.
// --verbose prints the request of every call not answered.

import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import { createRequire } from 'node:module';
import path from 'node:path';
import { base32Decode, totp } from '../src/accounts/two-factor/totp.ts';
import { parseCli } from './cli.ts';

const { values } = parseCli(
  {
    url: { type: 'string', default: 'http://127.0.0.1:8080', placeholder: 'url', description: "the running service's REST API" },
    sdk: {
      type: 'string',
      default: '/tmp/sdk18/cjs',
      placeholder: 'path',
      description: 'a CommonJS build of @withthegrid/platform-sdk (its folder with index.js and routes/)',
    },
    monitoring: { type: 'string', placeholder: 'assertion', description: "a monitoring environment's machine-account assertion" },
    connectivity: { type: 'string', placeholder: 'assertion', description: "a connectivity environment's machine-account assertion" },
    provision: {
      type: 'boolean',
      description: 'make both environments and their all-rights machine accounts with npm run admin (instead of the two assertions)',
    },
    'api-version': {
      type: 'string',
      number: true,
      placeholder: 'n',
      description: "the Api-Version sent and validated against (default: the SDK's own; 18.x: 8, 17.x: 5)",
    },
    verbose: { type: 'boolean', description: 'print the request of every call not answered' },
  },
  {
    usage: `usage: node scripts/sdk-check.ts [options]
Drives every route of a build of the original SDK against a running service and prints one row per route: the HTTP
status and whether the answer passed the SDK's own validation. Exit 1 when an answer failed it or a call erred
unexpectedly. Give --monitoring and --connectivity, or --provision (docs/walkthrough.md).`,
  },
);

type EnvType = 'monitoring' | 'connectivity';
interface JoiDescription {
  type: string;
  flags?: { presence?: string; default?: unknown; only?: boolean };
  allow?: unknown[];
  examples?: unknown[];
  keys?: Record<string, JoiDescription>;
  items?: JoiDescription[];
  matches?: { schema?: JoiDescription; then?: JoiDescription }[];
  rules?: { name: string; args?: { limit?: number } }[];
}
interface JoiSchema {
  describe(): JoiDescription;
  validate(v: unknown): { error?: Error };
}
interface RouteOptions {
  method: string;
  path: string;
  params?: JoiSchema;
  query?: JoiSchema;
  body?: JoiSchema | ((v: number) => JoiSchema);
  response?: unknown;
  right: { environment?: string; supplier?: string };
}
interface Route {
  group: string;
  prop: string;
  name: string;
  options: RouteOptions;
}
interface Sdk {
  routes: Record<string, Record<string, (request: unknown) => { response: Promise<unknown> }>>;
  machineLogin(assertion: string): Promise<{ jwt: string; environment?: { hashId: string } }>;
  changeEnvironment(hashId?: string, type?: string): void;
  resumeSession(jwt: string, hashId?: string, type?: string): void;
  comms: {
    axios: {
      get(path: string): Promise<{ data: unknown }>;
      post(path: string, body: unknown): Promise<{ data: unknown }>;
      defaults: { headers: { common: Record<string, string> } };
      interceptors: { response: { use(ok: (r: { status: number }) => unknown, err: (e: { response?: { status: number; data?: unknown } }) => unknown): void } };
    };
    apiVersion: number;
  };
}
interface Session {
  type: EnvType;
  assertion: string;
  sdk: Sdk;
  envHashId: string;
  userHashId: string;
  registry: Map<string, string>;
  world: { claimToken?: string; otherQuantity?: string };
  last: { status: number; body?: unknown };
}

const camel = (s: string) => s.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
const sdkRequire = createRequire(path.join(path.resolve(values.sdk), 'index.js'));

function loadRoutes(): Route[] {
  const dir = path.join(path.resolve(values.sdk), 'routes');
  const routes: Route[] = [];
  for (const group of readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort()) {
    // one file per operation besides the group's class (index) and its list (routes); the SDK's method is the file's name in camelCase
    for (const file of readdirSync(path.join(dir, group))
      .filter((f) => f.endsWith('.js') && f !== 'index.js' && f !== 'routes.js')
      .sort()) {
      const mod = sdkRequire(path.join(dir, group, file)) as { controllerGeneratorOptions?: RouteOptions };
      if (mod.controllerGeneratorOptions) routes.push({ group, prop: camel(group), name: camel(file.slice(0, -3)), options: mod.controllerGeneratorOptions });
    }
  }
  return routes;
}

/** The noun a route's hashId names: addPinGroup → pinGroup, label.get → label. */
function nounOf(route: Route): string {
  const rest = route.name.replace(/^(add|get|find|update|delete|set|create|remove|send|claim|unclaim|link|unlink)/, '');
  return rest === '' ? route.prop : rest[0].toLowerCase() + rest.slice(1);
}

/** The hashId a route's params.hashId names: of its noun, of the noun's leading words (getPinGroupPerformance: pinGroup), or of its group (issue.setSubscription: issue). */
function knownHashId(route: Route, s: Session): string | undefined {
  const words = nounOf(route).split(/(?=[A-Z])/);
  for (let n = words.length; n > 0; n--) {
    const h = s.registry.get(words.slice(0, n).join(''));
    if (h) return h;
  }
  return s.registry.get(route.prop);
}

/** A value the schema takes: its example, its default, or the least of its type. */
function sample(d: JoiDescription | undefined, key: string, s: Session): unknown {
  if (!d) return undefined;
  if (/HashIds$/.test(key) && d.type === 'array') {
    const h = s.registry.get(key.replace(/HashIds$/, ''));
    if (h) return [h];
  }
  if (/(^h|H)ashId$/.test(key) && d.type === 'string') {
    const h = s.registry.get(key.replace(/HashId$/, ''));
    if (h) return h;
  }
  if (key === 'mapLayer' && d.type === 'string') return 'default';
  if (d.examples && d.examples.length > 0) return d.examples[0];
  // an object's default is Joi's own ({ special: 'deep' }), not a value
  if (d.flags?.default !== undefined && typeof d.flags.default !== 'function' && typeof d.flags.default !== 'object') return d.flags.default;
  if (d.flags?.only && d.allow && d.allow.length > 0) return d.allow.find((v) => v !== null) ?? d.allow[0];
  const min = d.rules?.find((r) => r.name === 'min')?.args?.limit;
  switch (d.type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [k, child] of Object.entries(d.keys ?? {})) {
        // an optional key only with an example, and a hashId only of an object this run knows
        const known = !/HashIds?$/.test(k) || s.registry.has(k.replace(/HashIds?$/, ''));
        if (child.flags?.presence === 'required' || (child.examples && known)) out[k] = sample(child, k, s);
      }
      return out;
    }
    case 'string':
      return d.rules?.some((r) => r.name === 'email') ? 'sdk-check@example.com' : 'sdk check';
    case 'number':
      return min ?? 1;
    case 'boolean':
      return false;
    case 'date':
      return new Date().toISOString();
    case 'array':
      return Array.from({ length: min ?? 0 }, () => sample(d.items?.[0], key, s));
    case 'alternatives':
      return sample(d.matches?.[0]?.schema ?? d.matches?.[0]?.then, key, s);
    default:
      return null;
  }
}

// supplier code the examples cannot give (theirs are placeholders, not TypeScript)
const SUPPLIER_CODE: Record<string, Record<string, unknown>> = {
  'device-type.add': { eventHandler: 'function handle(args: Arguments, exec: Exec): void {\n}\n' },
  'supplier-report-type.add': {
    parser: 'function handle(args: { payload: string }, exec: Exec) {\n  return { generatedAt: new Date(), measurements: [] };\n}\n',
  },
  'supplier-webhook.add': { identifier: 'function handle(args: Arguments, exec: Exec) {\n  return null;\n}\n' },
  'supplier-certificate.add': { identifier: 'function handle(args: Arguments, exec: Exec) {\n  return null;\n}\n' },
};

// requests the schemas' first alternatives or examples cannot make valid, by the objects this run made
const PATCHES: Record<string, (s: Session) => { params?: Record<string, unknown>; body?: Record<string, unknown>; query?: Record<string, unknown> }> = {
  'analytics.find': () => ({ query: { source: 'pinGroup', columns: [{ field: 'pinGroup.hashId' }] } }),
  'graph.setNotification': (s) => ({ params: { hashId: s.registry.get('grid') } }),
  'graph.updateEdge': () => ({ body: { fields: undefined, nodeHashIds: undefined, mapLayer: 'default' } }),
  'device.claim': (s) => ({ body: { claimTokens: [s.world.claimToken] } }),
  'command.add': (s) => ({ body: { objectHashIds: [s.registry.get('device')], fields: {} } }),
  // the second quantity goes into the first, which the later routes go on using
  'quantity.merge': (s) => ({ params: { sourceQuantityHashId: s.world.otherQuantity }, body: { targetQuantityHashId: s.registry.get('quantity') } }),
  'device-type.add': (s) => ({ body: { commandTypeHashIds: [s.registry.get('commandType')] } }),
  'device.delete': (s) => ({ body: { hashIds: [s.registry.get('device')] } }),
  'device.unclaim': (s) => ({ body: { hashIds: [s.registry.get('device')] } }),
  'import-request.add': () => ({ body: { dataUrl: `data:text/csv;base64,${Buffer.from('pinGroup.name\nsdk check\n').toString('base64')}` } }),
  'issue-comment.update': (s) => ({ params: { hashId: s.registry.get('comment') } }),
  'issue-comment.delete': (s) => ({ params: { hashId: s.registry.get('comment') } }),
  'supplier-activity.get': (s) => ({ params: { hashId: s.registry.get('activity') } }),
  'subscription.add': (s) => ({ body: { objectType: 'deviceType', objectHashId: s.registry.get('deviceType') } }),
  'device-type.update': () => ({ body: { identifierFieldKey: undefined } }),
  'supplier-report-type.update': () => ({ body: SUPPLIER_CODE['supplier-report-type.add'] }),
};

function requestOf(route: Route, s: Session): Record<string, unknown> {
  const o = route.options;
  const request: Record<string, unknown> = {};
  if (o.params) {
    const params = sample(o.params.describe(), '', s) as Record<string, unknown>;
    if ('hashId' in params) params.hashId = knownHashId(route, s) ?? params.hashId;
    request.params = params;
  }
  // a query of defaults where the schema takes one (find's paging and sorting)
  if (o.query) request.query = o.query.validate({}).error ? sample(o.query.describe(), '', s) : {};
  const body = typeof o.body === 'function' ? o.body(s.sdk.comms.apiVersion) : o.body;
  if (body) request.body = sample(body.describe(), '', s);
  // what no example can know
  if (route.prop === 'authentication') request.body = { assertion: s.assertion };
  if (route.prop === 'twoFactorAuthentication' && route.name !== 'enable') request.body = { password: s.assertion.split(':')[1] };
  const sent = request.body as Record<string, unknown> | undefined;
  if (sent) Object.assign(sent, SUPPLIER_CODE[`${route.group}.${route.name}`] ?? {});
  if (sent && route.prop === 'deviceType' && route.name === 'add') delete sent.identifierFieldKey;
  const patch = PATCHES[`${route.group}.${route.name}`]?.(s);
  if (patch?.params) request.params = { ...(request.params as object), ...patch.params };
  if (patch?.query) request.query = { ...(request.query as object), ...patch.query };
  if (patch?.body) request.body = JSON.parse(JSON.stringify({ ...sent, ...patch.body })) as unknown;
  if (sent && route.prop === 'user' && s.type === 'connectivity' && Array.isArray(sent.rights)) sent.rights = ['ENVIRONMENT_ADMIN'];
  return request;
}

/** Keeps every hashId an answer shows, by the key of the object that holds it (pinGroup, edge, ...). */
function remember(value: unknown, key: string, s: Session, depth = 0): void {
  if (depth > 6 || value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const v of value.slice(0, 3)) remember(v, key, s, depth + 1);
    return;
  }
  const o = value as Record<string, unknown>;
  if (typeof o.hashId === 'string' && key && !s.registry.has(key)) s.registry.set(key, o.hashId);
  for (const [k, v] of Object.entries(o)) remember(v, k === 'rows' ? key : k, s, depth + 1);
}

interface Row {
  route: string;
  env: EnvType;
  status: string;
  validation: string;
}

// answers that differ from what an older SDK expects because the service follows 18.3.1 there, by
// `<SDK major> <route> <environment type>` (docs/decisions.md, *SDK route checker*)
const EXPECTED: Record<string, string> = {
  '17 supplier-certificate.get monitoring': '18.3.1 gives this route the supplier right only: 403 in a monitoring environment',
  '17 supplier-webhook.get monitoring': '18.3.1 gives this route the supplier right only: 403 in a monitoring environment',
  '17 graph.getPinGroup monitoring': "pins in 18.3.1's shape ({ pin, grids }) at every Api-Version",
  '17 measurement.setAnomalousUser monitoring':
    '404: not served (18.3.1 has no anomalousUser; a measurement is not found by hashId without an index on every ingest write)',
};

async function drive(route: Route, s: Session): Promise<Row> {
  const label = `${route.group}.${route.name}`;
  let request: Record<string, unknown>;
  try {
    request = requestOf(route, s);
  } catch (err) {
    return { route: label, env: s.type, status: '-', validation: `no request: ${(err as Error).message}` };
  }
  const params = request.params as { hashId?: string } | undefined;
  if (phase(route) === 2 && params?.hashId === s.userHashId)
    return { route: label, env: s.type, status: '-', validation: 'skipped: it would delete the checking account (no other user was added)' };
  if (typeof s.sdk.routes[route.prop]?.[route.name] !== 'function') return { route: label, env: s.type, status: '-', validation: 'no such SDK method' };
  s.last = { status: 0 };
  try {
    const answer = await s.sdk.routes[route.prop][route.name](request).response;
    remember(answer, nounOf(route), s);
    if (label === 'command.add') await rememberCommand(s);
    if (route.name.startsWith('add') && answer && typeof answer === 'object' && typeof (answer as { hashId?: unknown }).hashId === 'string') {
      s.registry.set(nounOf(route), (answer as { hashId: string }).hashId);
    }
    return { route: label, env: s.type, status: String(s.last.status), validation: route.options.response ? 'passed' : 'no response schema' };
  } catch (err) {
    const e = err as Error & { key?: string };
    if (values.verbose) console.error(label, JSON.stringify(request));
    const status = s.last.status ? String(s.last.status) : '-';
    if (e.message.startsWith('Response does not adhere to schema'))
      return { route: label, env: s.type, status, validation: `FAILED: ${e.message.slice(35, 200)}` };
    const body = s.last.body as { key?: string; message?: string } | undefined;
    const why = body?.key ? `${body.key}: ${String(body.message).slice(0, 120)}` : `${e.constructor.name}: ${e.message.slice(0, 120)}`;
    return { route: label, env: s.type, status, validation: `not answered (${why})` };
  }
}

/** command.add answers nothing: keep the command this session put on its device (the supplier also sees the customer's). */
async function rememberCommand(s: Session): Promise<void> {
  const found = (await s.sdk.comms.axios.get('/command/')).data as { rows: { command: { hashId: string; deviceHashId: string } }[] };
  const own = found.rows.find((r) => r.command.deviceHashId === s.registry.get('device'));
  if (own) s.registry.set('command', own.command.hashId);
}

function provision(type: EnvType, rights: string): string {
  const admin = (...args: string[]) => JSON.parse(execFileSync('npm', ['run', '-s', 'admin', '--', ...args], { encoding: 'utf8' })) as Record<string, string>;
  const env = admin('create-environment', '--type', type, '--name', `sdk check ${type}`).hashId;
  return admin('create-machine-account', '--environment', env, '--rights', rights).assertion;
}

async function session(type: EnvType, assertion: string): Promise<Session> {
  const PlatformSdk = (sdkRequire(path.resolve(values.sdk)) as { default: new (url: string) => Sdk }).default;
  const sdk = new PlatformSdk(values.url);
  if (values['api-version']) {
    // the SDK picks its versioned request and response schemas by comms.apiVersion and sends the header it set at construction
    sdk.comms.apiVersion = Number(values['api-version']);
    sdk.comms.axios.defaults.headers.common['Api-Version'] = values['api-version'];
  }
  const s: Session = { type, assertion, sdk, envHashId: '', userHashId: assertion.split(':')[0], registry: new Map(), world: {}, last: { status: 0 } };
  sdk.comms.axios.interceptors.response.use(
    (r) => {
      s.last = { status: r.status };
      return r;
    },
    (e) => {
      s.last = { status: e.response?.status ?? 0, body: e.response?.data };
      return Promise.reject(e);
    },
  );
  const login = await sdk.machineLogin(assertion);
  if (type === 'connectivity') {
    const suppliers = (await sdk.routes.supplier.find({}).response) as { rows: { supplier: { hashId: string } }[] };
    s.envHashId = suppliers.rows[0].supplier.hashId;
    sdk.changeEnvironment(s.envHashId, 'supplier');
  } else {
    s.envHashId = login.environment?.hashId ?? '';
  }
  s.registry.set(type === 'monitoring' ? 'environment' : 'supplier', s.envHashId);
  return s;
}

// adds whose objects later adds name go first, in this order; those that need the world's devices (or
// an object of an earlier add) after prepareWorld
const FIRST = ['graph.addNode', 'quantity.add', 'report-type.add', 'command-type.add', 'device-type.add', 'issue.add', 'label.add'];
const AFTER_WORLD = ['measurement-filter.add', 'settings.addExport', 'command.add', 'subscription.add', 'report.add', 'issue.addComment', 'graph.addEdge'];
// deletes of what others hold go before those others' (a pin group's delete takes its pins, issues and reports along)
const DELETE_FIRST = ['issue-comment.delete', 'issue.delete', 'report.delete', 'graph.deletePin', 'graph.deleteEdge', 'device-type.delete'];
const WORLD = 0.5;

const phase = (r: Route) => {
  const label = `${r.group}.${r.name}`;
  // the checking accounts' own environments go last
  if ((r.prop === 'environment' || r.prop === 'supplier') && r.name === 'delete') return 4;
  if (r.prop === 'authentication' || r.prop === 'twoFactorAuthentication') return 3;
  if (AFTER_WORLD.includes(label)) return 0.7;
  if (/^(add|create)/.test(r.name)) return 0;
  // a device is unlinked before it is unclaimed
  if (label === 'device.unlink') return 1.9;
  if (/^(delete|remove|unclaim|unlink)/.test(r.name)) return 2;
  return 1;
};
const rank = (r: Route) => {
  const label = `${r.group}.${r.name}`;
  const i = Math.max(FIRST.indexOf(label), AFTER_WORLD.indexOf(label), DELETE_FIRST.indexOf(label));
  return i >= 0 ? i - 100 : r.name.startsWith('addPinGroup') ? -200 : 0;
};

/** What no route's example can make: devices with a PSK (one the monitoring environment claimed, one with a claim token for device.claim, one of the supplier's own), and a second quantity for merge. */
async function prepareWorld(m: Session, c: Session): Promise<void> {
  const post = async <T>(s: Session, url: string, body: unknown) => (await s.sdk.comms.axios.post(url, body)).data as T;
  const run = Date.now().toString(36);
  const device = async (n: number) =>
    (
      await post<{ hashId: string }>(c, '/device/psk', {
        supplierDeviceIdentifier: `sdk-check-${run}-${n}`,
        deviceTypeHashId: c.registry.get('deviceType'),
        psk: '00112233445566778899aabbccddeeff',
        pskIdentity: `sdk-check-${run}-${n}`,
      })
    ).hashId;
  const token = async (hashId: string) =>
    (await post<{ claimTokens: { claimToken: string }[] }>(c, '/device/claim-tokens', { deviceHashIds: [hashId] })).claimTokens[0].claimToken;
  const [claimed, toClaim, own] = [await device(1), await device(2), await device(3)];
  await post(m, '/device/claim', { claimTokens: [await token(claimed)] });
  m.world.claimToken = await token(toClaim);
  m.registry.set('device', claimed);
  c.registry.set('device', own);
  // the monitoring environment sees the supplier's types through its claimed device
  for (const noun of ['deviceType', 'commandType']) if (c.registry.has(noun)) m.registry.set(noun, c.registry.get(noun)!);
  m.registry.set('supplier', c.envHashId);
  // an activity: a webhook request whose identifier names a fourth device, run by the worker
  const { url } = await post<{ url: string }>(c, '/supplier-webhook/', {
    name: `sdk check ${run}`,
    identifier: `function handle(args: Arguments, exec: Exec) {\n  return { deviceTypeHashId: '${c.registry.get('deviceType')}', deviceIdentifier: 'sdk-check-${run}-4' };\n}\n`,
  });
  await new Promise<void>((resolve, reject) => {
    // the device port's development certificate is not the checker's to trust
    https
      .request(url, { method: 'POST', rejectUnauthorized: false, headers: { 'content-type': 'application/json' } }, (res) => res.resume().on('end', resolve))
      .on('error', reject)
      .end('{}');
  });
  for (let i = 0; i < 50 && !c.registry.has('activity'); i++) {
    const found = (await c.sdk.comms.axios.get('/supplier-activity/')).data as { rows: { activity: { hashId: string } }[] };
    if (found.rows.length > 0) c.registry.set('activity', found.rows[0].activity.hashId);
    else await new Promise((r) => setTimeout(r, 100));
  }
  for (const s of [m, c]) {
    s.world.otherQuantity = (
      await post<{ hashId: string }>(s, '/quantity/', {
        name: `sdk check ${run}`,
        unit: 'm',
        defaultCriticallyLowThreshold: null,
        defaultLowThreshold: null,
        defaultHighThreshold: null,
        defaultCriticallyHighThreshold: null,
      })
    ).hashId;
  }
}

async function main(): Promise<void> {
  const monitoringAssertion =
    values.monitoring ??
    (values.provision ? provision('monitoring', 'READ,STATIC,ISSUES,AUDIT_TRAIL,USERS,EXPORT,IMPORT,SENSORS,REPORTS,THRESHOLDS,ENVIRONMENT_ADMIN') : undefined);
  const connectivityAssertion = values.connectivity ?? (values.provision ? provision('connectivity', 'ENVIRONMENT_ADMIN') : undefined);
  if (!monitoringAssertion || !connectivityAssertion) throw new Error('give --monitoring and --connectivity assertions, or --provision');
  const sessions: Record<EnvType, Session> = {
    monitoring: await session('monitoring', monitoringAssertion),
    connectivity: await session('connectivity', connectivityAssertion),
  };
  const routes = loadRoutes().sort((a, b) => phase(a) - phase(b) || rank(a) - rank(b));
  const rows: Row[] = [];
  let worldReady = false;
  for (const route of routes) {
    if (!worldReady && phase(route) > WORLD) {
      worldReady = true;
      await prepareWorld(sessions.monitoring, sessions.connectivity).catch((err: Error & { response?: { data?: unknown } }) =>
        console.error(`no world: ${err.message} ${JSON.stringify(err.response?.data)}`),
      );
    }
    const { environment, supplier } = route.options.right;
    // a route without rights on suppliers or subscriptions concerns the connectivity account's own (the monitoring account is in no supplier)
    const own = !environment && !supplier && (route.prop === 'supplier' || route.prop === 'subscription');
    const types: EnvType[] = environment && supplier ? ['monitoring', 'connectivity'] : supplier || own ? ['connectivity'] : ['monitoring'];
    for (const type of types) {
      const s = sessions[type];
      const row =
        route.prop === 'twoFactorAuthentication' && route.name === 'enable'
          ? await enableTwoFactor(route, s).catch((err: Error) => ({
              route: `${route.group}.${route.name}`,
              env: type,
              status: String(s.last.status),
              validation: `not answered (${err.message.slice(0, 120)})`,
            }))
          : await drive(route, s);
      console.error(`${row.route} ${row.env} ${row.status} ${row.validation}`);
      rows.push(row);
    }
  }
  const version = (JSON.parse(readFileSync(path.join(path.resolve(values.sdk), '..', 'package.json'), 'utf8')) as { version: string }).version;
  const apiVersion = sessions.monitoring.sdk.comms.apiVersion;
  for (const row of rows) {
    const why =
      row.validation === 'passed' || row.validation === 'no response schema' ? undefined : EXPECTED[`${version.split('.')[0]} ${row.route} ${row.env}`];
    if (why) row.validation = `expected (${row.validation.slice(0, 60)}): ${why}`;
  }
  console.log(`SDK ${version} (${values.sdk}) at Api-Version ${apiVersion} against ${values.url}: ${routes.length} routes`);
  console.table(rows);
  const named = (list: Row[]) => (list.length ? `: ${list.map((r) => `${r.route} (${r.env})`).join(', ')}` : '');
  const missing = rows.filter((r) => r.validation.includes('No operation') && !r.validation.startsWith('expected'));
  const answered = rows.filter((r) => /^2\d\d$/.test(r.status));
  const passed = rows.filter((r) => r.validation === 'passed' || r.validation === 'no response schema');
  const expected = rows.filter((r) => r.validation.startsWith('expected'));
  const failed = rows.filter((r) => r.validation.startsWith('FAILED'));
  const other = rows.filter((r) => !missing.includes(r) && !passed.includes(r) && !expected.includes(r) && !failed.includes(r));
  console.log(
    [
      `SDK ${version} at Api-Version ${apiVersion}: ${rows.length} calls`,
      `  answered (2xx):            ${answered.length}`,
      `  404 No operation:          ${missing.length}${named(missing)}`,
      `  passed the SDK validation: ${passed.length} (${passed.filter((r) => r.validation === 'no response schema').length} of them without a response schema)`,
      `  expected errors:           ${expected.length}${named(expected)}`,
      `  failed the SDK validation: ${failed.length}${named(failed)}`,
      `  other errors:              ${other.length}${named(other)}`,
    ].join('\n'),
  );
  process.exitCode = missing.length + failed.length + other.length > 0 ? 1 : 0;
}

/** get-keyuri ran before; enable with the key's code, then go on with the token enable answered, and switch it off again. */
async function enableTwoFactor(route: Route, s: Session): Promise<Row> {
  const secret = s.assertion.split(':')[1];
  const keyuri = (await s.sdk.routes.twoFactorAuthentication.getKeyuri({ body: { password: secret } }).response) as { secret: string | null };
  if (!keyuri.secret)
    return { route: `${route.group}.${route.name}`, env: s.type, status: '-', validation: 'not answered (no key: two-factor authentication was on already)' };
  const key = base32Decode(keyuri.secret);
  s.last = { status: 0 };
  const answer = (await s.sdk.routes.twoFactorAuthentication.enable({ body: { code: totp(key, Date.now() / 1000) } }).response) as { jwt: string };
  const row = { route: `${route.group}.${route.name}`, env: s.type, status: String(s.last.status), validation: 'passed' };
  s.sdk.resumeSession(answer.jwt, s.envHashId, s.type === 'connectivity' ? 'supplier' : 'environment');
  await s.sdk.routes.twoFactorAuthentication.disable({ body: { password: `${secret}:${totp(key, Date.now() / 1000 + 30)}` } }).response;
  return row;
}

main().catch((err) => {
  console.error(err);
  process.exit(2);
});
