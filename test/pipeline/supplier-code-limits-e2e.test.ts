import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/app/bootstrap.ts';
import type { AppContext } from '../../src/app/context.ts';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';
import { clearCompileCache } from '../../src/sandbox/compile.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';

// Supplier code that misbehaves, seen from the outside: over the REST API and the HTTPS-PSK device port.

interface Api { request<T = Record<string, unknown>>(method: string, url: string, body?: unknown): Promise<{ status: number; body: T }> }
interface Supplier { api: Api; reportTypeHashId: string; quantityHashId: string }
interface Device { identity: string; key: string; hashId: string }

let ctx: AppContext;
let service: RunningService;
let port: number;
let base: string;

async function supplier(name: string): Promise<Supplier> {
  const env = await createEnvironment(ctx.db, 'connectivity', name);
  const account = await createMachineAccount(ctx.db, env.hashId, ['ENVIRONMENT_ADMIN']);
  const login = await fetch(`${base}/authentication/machine-login`, { method: 'POST', headers: { 'content-type': 'application/json', 'api-version': '5' }, body: JSON.stringify({ assertion: account.assertion }) });
  const { jwt } = (await login.json()) as { jwt: string };
  const api: Api = {
    async request(method, url, body) {
      const res = await fetch(`${base}${url}`, {
        method,
        headers: { 'api-version': '5', 'environment-hash-id': env.hashId, authorization: `Bearer ${jwt}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    },
  };
  const quantity = await api.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: 0 });
  const reportType = await api.request<{ hashId: string }>('POST', '/supplier-report-type/', {
    name: 'report', fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: `const Q = "${quantity.body.hashId}";
function handle(args: { payload: string }, exec: Exec) {
  exec.addLog('payload ' + args.payload);
  if (args.payload.startsWith('surrogate')) return { generatedAt: new Date(), measurements: [], fields: { note: 'bad \\ud800 half', nul: 'a\\u0000b' } };
  return { generatedAt: new Date(), measurements: [{ channelIndex: 0, quantityHashId: Q, orderOfMagnitude: 0, significand: 1 }] };
}`,
  });
  expect(reportType.status).toBe(200);
  return { api, reportTypeHashId: reportType.body.hashId, quantityHashId: quantity.body.hashId };
}

async function deviceTypeOf(s: Supplier, eventHandler: string) {
  return s.api.request<{ hashId: string; key?: string; message?: string }>('POST', '/device-type/', {
    name: `type ${randomBytes(3).toString('hex')}`, eventHandler: eventHandler.replaceAll('__REPORT_TYPE__', s.reportTypeHashId),
    fieldConfigurations: [], pinGroupFieldConfigurations: [], channels: [{ name: 'V', pinFieldConfigurations: [], defaultPinName: 'V', charts: [] }], commandTypeHashIds: [],
  });
}

async function deviceOf(s: Supplier, deviceTypeHashId: string): Promise<Device> {
  const device = { identity: `dev-${randomBytes(6).toString('hex')}`, key: randomBytes(16).toString('hex'), hashId: '' };
  const added = await s.api.request<{ hashId: string }>('POST', '/device/psk', { supplierDeviceIdentifier: device.identity, deviceTypeHashId, psk: device.key, pskIdentity: device.identity });
  expect(added.status).toBe(200);
  device.hashId = added.body.hashId;
  return device;
}

async function deviceRequest(device: Device, path: string, body: string | null) {
  const out = await opensslPsk({ port, identity: device.identity, keyHex: device.key, input: httpRequestText(body === null ? 'GET' : 'POST', path, body) });
  return parseHttpResponse(out.stdout);
}

const ECHO = `
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  return { statusCode: 200, body: { ok: 'echo', path: args.event.webRequest.url.path } };
}`;

// about 1,100 nested parentheses overflow the type stripper's WebAssembly stack: in the process's own stripper
// this broke every later compile of every supplier ("memory access out of bounds") until a restart
const POISON = `const a = ${'('.repeat(3000)}1${')'.repeat(3000)};\nfunction handle() { return { statusCode: 200, body: a }; }\n`;

beforeAll(async () => {
  ctx = await testContext({ SANDBOX_TIMEOUT_MS: '2000', SANDBOX_MAX_ANSWER_BYTES: '10000', SANDBOX_MAX_CALL_BYTES: '20000', ACTIVITY_MAX_TRIGGER_DATA_BYTES: '30000', DEVICE_BODY_LIMIT_BYTES: '50000' });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  base = `http://127.0.0.1:${service.apiPort()}`;
});

afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

describe('compiling supplier code cannot fail for anyone but its author', () => {
  it('after one supplier saves code that faults the compiler, another supplier saves code and its devices are answered', async () => {
    const victim = await supplier('victim');
    const attacker = await supplier('attacker');
    const victimType = await deviceTypeOf(victim, ECHO);
    expect(victimType.status).toBe(200);
    const victimDevice = await deviceOf(victim, victimType.body.hashId);

    const poisoned = await deviceTypeOf(attacker, POISON);
    expect(poisoned.status).toBe(400);
    expect(poisoned.body).toMatchObject({ key: 'parameter_error' });

    // a new save of the other supplier compiles
    const saved = await deviceTypeOf(victim, `${ECHO}\nconst VERSION: number = 2;\n`);
    expect(saved.status).toBe(200);
    // and its device's handler compiles again when its cached result is gone (evicted, or another process)
    clearCompileCache();
    const res = await deviceRequest(victimDevice, '/after-poison', '{}');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ ok: 'echo', path: '/after-poison' });
    expect(poisoned.body.message).toMatch(/^eventHandler: .*TypeScript compiler failed on this code/);
  });
});
