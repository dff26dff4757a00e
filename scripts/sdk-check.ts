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
// Api-Version is sent (18.x: 8, 17.x: 5). Requests are made from the SDK's Joi schemas (their
// examples, or the least value each type allows) with the hashIds of objects the run created or
// found in place of the examples' hashIds; adds run first, deletes last, two-factor
// authentication and login at the end. A route that answers 404 "No operation" is missing.

import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { base32Decode, totp } from '../src/accounts/two-factor/totp.ts';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    sdk: { type: 'string', default: '/tmp/sdk18/cjs' },
    monitoring: { type: 'string' },
    connectivity: { type: 'string' },
    provision: { type: 'boolean', default: false },
  },
});

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
interface JoiSchema { describe(): JoiDescription; validate(v: unknown): { error?: Error } }
interface RouteOptions { method: string; path: string; params?: JoiSchema; query?: JoiSchema; body?: JoiSchema | ((v: number) => JoiSchema); response?: unknown; right: { environment?: string; supplier?: string } }
interface Route { group: string; prop: string; name: string; options: RouteOptions }
interface Sdk {
  routes: Record<string, Record<string, (request: unknown) => { response: Promise<unknown> }>>;
  machineLogin(assertion: string): Promise<{ jwt: string; environment?: { hashId: string } }>;
  changeEnvironment(hashId?: string, type?: string): void;
  resumeSession(jwt: string, hashId?: string, type?: string): void;
  comms: { axios: { interceptors: { response: { use(ok: (r: { status: number }) => unknown, err: (e: { response?: { status: number; data?: unknown } }) => unknown): void } } }; apiVersion: number };
}
interface Session { type: EnvType; assertion: string; sdk: Sdk; envHashId: string; userHashId: string; registry: Map<string, string>; last: { status: number; body?: unknown } }

const camel = (s: string) => s.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
const sdkRequire = createRequire(path.join(path.resolve(values.sdk), 'index.js'));

function loadRoutes(): Route[] {
  const dir = path.join(path.resolve(values.sdk), 'routes');
  const routes: Route[] = [];
  for (const group of readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort()) {
    // one file per operation besides the group's class (index) and its list (routes); the SDK's method is the file's name in camelCase
    for (const file of readdirSync(path.join(dir, group)).filter((f) => f.endsWith('.js') && f !== 'index.js' && f !== 'routes.js').sort()) {
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
  if (d.flags?.default !== undefined && typeof d.flags.default !== 'function') return d.flags.default;
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
    case 'string': return d.rules?.some((r) => r.name === 'email') ? 'sdk-check@example.com' : 'sdk check';
    case 'number': return min ?? 1;
    case 'boolean': return false;
    case 'date': return new Date().toISOString();
    case 'array': return Array.from({ length: min ?? 0 }, () => sample(d.items?.[0], key, s));
    case 'alternatives': return sample(d.matches?.[0]?.schema ?? d.matches?.[0]?.then, key, s);
    default: return null;
  }
}

// supplier code the examples cannot give (theirs are placeholders, not TypeScript)
const SUPPLIER_CODE: Record<string, Record<string, unknown>> = {
  'device-type.add': { eventHandler: 'function handle(args: Arguments, exec: Exec): void {\n}\n', commandTypeHashIds: [] },
  'supplier-report-type.add': { parser: 'function handle(args: { payload: string }, exec: Exec) {\n  return { generatedAt: new Date(), measurements: [] };\n}\n' },
  'supplier-webhook.add': { identifier: 'function handle(args: Arguments, exec: Exec) {\n  return null;\n}\n' },
  'supplier-certificate.add': { identifier: 'function handle(args: Arguments, exec: Exec) {\n  return null;\n}\n' },
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

interface Row { route: string; env: EnvType; status: string; validation: string }

async function drive(route: Route, s: Session): Promise<Row> {
  const label = `${route.group}.${route.name}`;
  let request: Record<string, unknown>;
  try {
    request = requestOf(route, s);
  } catch (err) {
    return { route: label, env: s.type, status: '-', validation: `no request: ${(err as Error).message}` };
  }
  const params = request.params as { hashId?: string } | undefined;
  if (phase(route) === 2 && params?.hashId === s.userHashId) return { route: label, env: s.type, status: '-', validation: 'skipped: it would delete the checking account (no other user was added)' };
  if (typeof s.sdk.routes[route.prop]?.[route.name] !== 'function') return { route: label, env: s.type, status: '-', validation: 'no such SDK method' };
  s.last = { status: 0 };
  try {
    const answer = await s.sdk.routes[route.prop][route.name](request).response;
    remember(answer, nounOf(route), s);
    if (route.name.startsWith('add') && answer && typeof answer === 'object' && typeof (answer as { hashId?: unknown }).hashId === 'string') {
      s.registry.set(nounOf(route), (answer as { hashId: string }).hashId);
    }
    return { route: label, env: s.type, status: String(s.last.status), validation: route.options.response ? 'passed' : 'no response schema' };
  } catch (err) {
    const e = err as Error & { key?: string };
    const status = s.last.status ? String(s.last.status) : '-';
    if (e.message.startsWith('Response does not adhere to schema')) return { route: label, env: s.type, status, validation: `FAILED: ${e.message.slice(35, 200)}` };
    const body = s.last.body as { key?: string; message?: string } | undefined;
    const why = body?.key ? `${body.key}: ${String(body.message).slice(0, 120)}` : `${e.constructor.name}: ${e.message.slice(0, 120)}`;
    return { route: label, env: s.type, status, validation: `not answered (${why})` };
  }
}

function provision(type: EnvType, rights: string): string {
  const admin = (...args: string[]) => JSON.parse(execFileSync('npm', ['run', '-s', 'admin', '--', ...args], { encoding: 'utf8' })) as Record<string, string>;
  const env = admin('create-environment', '--type', type, '--name', `sdk check ${type}`).hashId;
  return admin('create-machine-account', '--environment', env, '--rights', rights).assertion;
}

async function session(type: EnvType, assertion: string): Promise<Session> {
  const PlatformSdk = (sdkRequire(path.resolve(values.sdk)) as { default: new (url: string) => Sdk }).default;
  const sdk = new PlatformSdk(values.url);
  const s: Session = { type, assertion, sdk, envHashId: '', userHashId: assertion.split(':')[0], registry: new Map(), last: { status: 0 } };
  sdk.comms.axios.interceptors.response.use((r) => {
    s.last = { status: r.status };
    return r;
  }, (e) => {
    s.last = { status: e.response?.status ?? 0, body: e.response?.data };
    return Promise.reject(e);
  });
  const login = await sdk.machineLogin(assertion);
  if (type === 'connectivity') {
    const suppliers = await sdk.routes.supplier.find({}).response as { rows: { supplier: { hashId: string } }[] };
    s.envHashId = suppliers.rows[0].supplier.hashId;
    sdk.changeEnvironment(s.envHashId, 'supplier');
  } else {
    s.envHashId = login.environment?.hashId ?? '';
  }
  s.registry.set(type === 'monitoring' ? 'environment' : 'supplier', s.envHashId);
  return s;
}

const phase = (r: Route) => {
  // the checking accounts' own environments go last
  if ((r.prop === 'environment' || r.prop === 'supplier') && r.name === 'delete') return 4;
  if (r.prop === 'authentication' || r.prop === 'twoFactorAuthentication') return 3;
  if (/^(add|create)/.test(r.name)) return 0;
  if (/^(delete|remove|unclaim|unlink)/.test(r.name)) return 2;
  return 1;
};

async function main(): Promise<void> {
  const monitoringAssertion = values.monitoring ?? (values.provision ? provision('monitoring', 'READ,STATIC,ISSUES,AUDIT_TRAIL,USERS,EXPORT,SENSORS,REPORTS,THRESHOLDS,ENVIRONMENT_ADMIN') : undefined);
  const connectivityAssertion = values.connectivity ?? (values.provision ? provision('connectivity', 'ENVIRONMENT_ADMIN') : undefined);
  if (!monitoringAssertion || !connectivityAssertion) throw new Error('give --monitoring and --connectivity assertions, or --provision');
  const sessions: Record<EnvType, Session> = { monitoring: await session('monitoring', monitoringAssertion), connectivity: await session('connectivity', connectivityAssertion) };
  const routes = loadRoutes().sort((a, b) => phase(a) - phase(b) || (a.name.startsWith('addPinGroup') ? -1 : 0) - (b.name.startsWith('addPinGroup') ? -1 : 0));
  const rows: Row[] = [];
  for (const route of routes) {
    const { environment, supplier } = route.options.right;
    const types: EnvType[] = environment && supplier ? ['monitoring', 'connectivity'] : supplier ? ['connectivity'] : ['monitoring'];
    for (const type of types) {
      const s = sessions[type];
      const row = route.prop === 'twoFactorAuthentication' && route.name === 'enable'
        ? await enableTwoFactor(route, s).catch((err: Error) => ({ route: `${route.group}.${route.name}`, env: type, status: String(s.last.status), validation: `not answered (${err.message.slice(0, 120)})` }))
        : await drive(route, s);
      console.error(`${row.route} ${row.env} ${row.status} ${row.validation}`);
      rows.push(row);
    }
  }
  console.log(`SDK ${values.sdk} at Api-Version ${sessions.monitoring.sdk.comms.apiVersion} against ${values.url}: ${routes.length} routes`);
  console.table(rows);
  const missing = rows.filter((r) => r.validation.includes('No operation'));
  const passed = rows.filter((r) => r.validation === 'passed' || r.validation === 'no response schema');
  console.log(`${rows.length} calls: ${passed.length} answered and valid by the SDK, ${missing.length} missing (404 No operation), ${rows.length - passed.length - missing.length} answered otherwise`);
  process.exitCode = missing.length > 0 || rows.some((r) => r.validation.startsWith('FAILED')) ? 1 : 0;
}

/** get-keyuri ran before; enable with the key's code, then go on with the token enable answered, and switch it off again. */
async function enableTwoFactor(route: Route, s: Session): Promise<Row> {
  const secret = s.assertion.split(':')[1];
  const keyuri = await s.sdk.routes.twoFactorAuthentication.getKeyuri({ body: { password: secret } }).response as { secret: string | null };
  if (!keyuri.secret) return { route: `${route.group}.${route.name}`, env: s.type, status: '-', validation: 'not answered (no key: two-factor authentication was on already)' };
  const key = base32Decode(keyuri.secret);
  s.last = { status: 0 };
  const answer = await s.sdk.routes.twoFactorAuthentication.enable({ body: { code: totp(key, Date.now() / 1000) } }).response as { jwt: string };
  const row = { route: `${route.group}.${route.name}`, env: s.type, status: String(s.last.status), validation: 'passed' };
  s.sdk.resumeSession(answer.jwt, s.envHashId, s.type === 'connectivity' ? 'supplier' : 'environment');
  await s.sdk.routes.twoFactorAuthentication.disable({ body: { password: `${secret}:${totp(key, Date.now() / 1000 + 30)}` } }).response;
  return row;
}

main().catch((err) => {
  console.error(err);
  process.exit(2);
});
