// Trust anchors across the processes of one deployment: a gateway process (its own context on the
// same database, Redis, CERTS_DIR and QUEUE_NAME, role `gateway`) follows the supplier certificates
// added and deleted through an API process without any device asking, so a device's first
// handshake there already sees the change. Real PostgreSQL, Redis, libcoap.
import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { ensureCertificates } from '../../src/pki/files.ts';
import { onTrustLoaded, trustVersionKey, type TrustSnapshot } from '../../src/connectivity/supplier-certificates/trust.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { run } from '../coap/support.ts';
import { EVENT_HANDLER } from './fixtures.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { opensslCsr, opensslDeviceCert, tempDir } from '../pki/support.ts';

const identifier = (type: string) => `function handle(args: { certificate: { subjects: Subject[][] } }) {
  return { deviceTypeHashId: '${type}', deviceIdentifier: args.certificate.subjects[0].find((s) => s.key.value === 'CN')!.value.value };
}`;

let api: TestApi;
let a: ApiClient;
let gatewayCtx: AppContext;
let gateway: RunningService;
let certsDir: string;
let work: string;
let deviceType: string;

beforeAll(async () => {
  certsDir = tempDir();
  work = tempDir();
  const apiCtx = await testContext({ CERTS_DIR: certsDir });
  await ensureCertificates(apiCtx.config);
  api = await startTestApi(apiCtx);
  a = await api.login('connectivity');
  deviceType = (
    await a.request<{ hashId: string }>('POST', '/device-type/', {
      name: 't',
      eventHandler: EVENT_HANDLER,
      fieldConfigurations: [],
      pinGroupFieldConfigurations: [],
      channels: [],
      commandTypeHashIds: [],
    })
  ).body.hashId;
  // the other process: no worker, so a device's request is answered "accepted" once GATEWAY_WAIT_MS is over
  gatewayCtx = await testContext({ CERTS_DIR: certsDir, QUEUE_NAME: apiCtx.config.queueName, GATEWAY_WAIT_MS: '50' });
  gateway = await startService(gatewayCtx, ['gateway']);
});
afterAll(async () => {
  await gateway?.stop();
  if (gatewayCtx) await closeContext(gatewayCtx);
  await api?.close();
});

/** Every load of the gateway's anchors from now on (recorded, never asked for). */
function recordLoads(ctx: AppContext): { loads: TrustSnapshot[]; stop(): void } {
  const loads: TrustSnapshot[] = [];
  return { loads, stop: onTrustLoaded(ctx, (s) => loads.push(s)) };
}

async function addSupplier(name: string): Promise<{ hashId: string; fingerprint: string; device: { cert: string; key: string } }> {
  const csr = await opensslCsr(work, name, `/CN=${name} supplier`);
  const added = await a.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', {
    name,
    csr: csr.csrPem,
    identifier: identifier(deviceType),
  });
  expect(added.status).toBe(200);
  const cert = path.join(work, `${name}.pem`);
  writeFileSync(cert, added.body.certificate);
  return {
    hashId: added.body.hashId,
    fingerprint: new X509Certificate(added.body.certificate).fingerprint256,
    device: await opensslDeviceCert(work, `${name}-dev`, `/CN=${name}-meter`, cert, csr.key),
  };
}

const coapsAtGateway = (device: { cert: string; key: string }) =>
  run('coap-client-openssl', [
    '-B',
    '4',
    '-c',
    device.cert,
    '-j',
    device.key,
    '-C',
    path.join(certsDir, 'ca.pem'),
    '-m',
    'post',
    '-t',
    '50',
    '-e',
    '{"v":1}',
    `coaps://127.0.0.1:${gateway.coap!.coapsPort()}/report`,
  ]);

async function devices(): Promise<string[]> {
  const r = await a.request<{ rows: { device: { supplierDeviceIdentifier: string } }[] }>('GET', '/device/?rowsPerPage=100');
  return r.body.rows.map((row) => row.device.supplierDeviceIdentifier);
}

describe('trust anchors in a gateway process', () => {
  let first: Awaited<ReturnType<typeof addSupplier>>;

  it("a supplier certificate added through the API process is loaded by the gateway unasked; a device's first handshake there succeeds", async () => {
    const rec = recordLoads(gatewayCtx);
    try {
      first = await addSupplier('added');
      // nothing here asks the gateway for its anchors: it reloads on the announcement
      await vi.waitFor(() => expect(rec.loads.some((s) => s.supplierByFingerprint.has(first.fingerprint))).toBe(true), { timeout: 10_000, interval: 20 });
    } finally {
      rec.stop();
    }
    const res = await coapsAtGateway(first.device);
    expect(res.stdout + res.stderr).not.toMatch(/unknown CA/i);
    // the gateway identified the device (its identifier created it) and answered the request
    expect(res.stdout).toContain('accepted');
    expect(await devices()).toContain('added-meter');
  });

  it('deleted through the API process: the gateway drops it unasked; the next handshake there is refused (unknown CA)', async () => {
    const rec = recordLoads(gatewayCtx);
    try {
      expect((await a.request('DELETE', `/supplier-certificate/${first.hashId}`)).status).toBe(204);
      await vi.waitFor(() => expect(rec.loads.some((s) => !s.supplierByFingerprint.has(first.fingerprint))).toBe(true), { timeout: 10_000, interval: 20 });
    } finally {
      rec.stop();
    }
    const res = await coapsAtGateway(first.device);
    expect(res.stdout).not.toContain('accepted');
    expect(res.stdout + res.stderr).toMatch(/unknown CA/i);
  });

  it('a change whose announcement was lost reaches the gateway through its version check', async () => {
    let rec = recordLoads(gatewayCtx);
    const second = await addSupplier('unannounced');
    await vi.waitFor(() => expect(rec.loads.some((s) => s.supplierByFingerprint.has(second.fingerprint))).toBe(true), { timeout: 10_000, interval: 20 });
    rec.stop();
    rec = recordLoads(gatewayCtx);
    try {
      // what a process does on delete, less the pub/sub announcement: commit, then count the change
      await api.ctx.db.query('UPDATE supplier_certificate SET deleted_at = now() WHERE hash_id = $1', [second.hashId]);
      await api.ctx.redis.incr(trustVersionKey(api.ctx));
      await vi.waitFor(() => expect(rec.loads.some((s) => !s.supplierByFingerprint.has(second.fingerprint))).toBe(true), { timeout: 10_000, interval: 20 });
    } finally {
      rec.stop();
    }
    expect((await coapsAtGateway(second.device)).stdout).not.toContain('accepted');
  });
});
