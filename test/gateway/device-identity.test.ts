// identifyCertificateDevice as the CoAP/DTLS listener calls it: with the peer's chain, no TLS here.
import { X509Certificate, createPublicKey, sign, verify } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CertificateRefused, identifyCertificateDevice } from '../../src/gateway/device-identity.ts';
import { dtlsCertificateOptions } from '../../src/gateway/dtls-certificates.ts';
import { ensureCertificates } from '../../src/pki/files.ts';
import { Sandbox } from '../../src/sandbox/runner.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { EVENT_HANDLER } from '../connectivity/fixtures.ts';
import { opensslCsr, opensslDeviceCert, tempDir } from '../pki/support.ts';

let api: TestApi;
let a: ApiClient;
let b: ApiClient;
let work: string;
let deviceType: string;
const supplier = { hashId: '', cert: '', key: '' };
const pem = (p: string) => new X509Certificate(readFileSync(p));
const identifier = (type: string, suffix = '') => `function handle(args: { certificate: { subjects: Subject[][] } }) {
  const cn = args.certificate.subjects[0].find((s) => s.key.value === 'CN')!.value.value;
  if (cn === 'throws') throw new Error('no such device');
  return { deviceTypeHashId: cn === 'foreign-type' ? 'nope' : '${type}', deviceIdentifier: cn + '${suffix}' };
}`;

beforeAll(async () => {
  work = tempDir();
  const ctx = await testContext({ CERTS_DIR: tempDir() });
  await ensureCertificates(ctx.config);
  api = await startTestApi(ctx);
  a = await api.login('connectivity');
  b = await api.login('connectivity');
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
  const csr = await opensslCsr(work, 'sup', '/CN=Supplier for DTLS');
  const added = await a.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', {
    name: 's',
    csr: csr.csrPem,
    identifier: identifier(deviceType),
  });
  supplier.hashId = added.body.hashId;
  supplier.key = csr.key;
  supplier.cert = path.join(work, 'sup.pem');
  writeFileSync(supplier.cert, added.body.certificate);
});
afterAll(async () => {
  vi.restoreAllMocks();
  await api?.close();
});

const refusal = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CertificateRefused);
  return err as CertificateRefused;
};

describe('identifyCertificateDevice (the CoAP/DTLS entry)', () => {
  it('finds or creates the device the identifier names, once per certificate; an updated identifier names it afresh', async () => {
    const spy = vi.spyOn(Sandbox.prototype, 'runIdentifier');
    const dev = await opensslDeviceCert(work, 'd1', '/CN=coap-1', supplier.cert, supplier.key);
    const first = await identifyCertificateDevice(api.ctx, [pem(dev.cert), pem(supplier.cert)]);
    expect(first).toMatchObject({ environmentHashId: a.environmentHashId, supplierCertificateHashId: supplier.hashId, created: true });
    expect(first.certificate.subjects[0]).toEqual([{ key: { encoding: 'utf8', value: 'CN' }, value: { encoding: 'utf8', value: 'coap-1' } }]);
    const again = await identifyCertificateDevice(api.ctx, [pem(dev.cert)]);
    expect(again.deviceHashId).toBe(first.deviceHashId);
    expect(spy).toHaveBeenCalledTimes(1);
    const got = await a.request<{ device: { supplierDeviceIdentifier: string; deviceTypeHashId: string } }>('GET', `/device/${first.deviceHashId}`);
    expect(got.body.device).toMatchObject({ supplierDeviceIdentifier: 'coap-1', deviceTypeHashId: deviceType });
    expect((await b.request('GET', `/device/${first.deviceHashId}`)).status).toBe(404);

    await a.request('POST', `/supplier-certificate/${supplier.hashId}`, { identifier: identifier(deviceType, '-v2') });
    const renamed = await identifyCertificateDevice(api.ctx, [pem(dev.cert)]);
    expect(spy).toHaveBeenCalledTimes(2);
    expect(renamed.deviceHashId).not.toBe(first.deviceHashId);
    expect(
      (await a.request<{ device: { supplierDeviceIdentifier: string } }>('GET', `/device/${renamed.deviceHashId}`)).body.device.supplierDeviceIdentifier,
    ).toBe('coap-1-v2');
    await a.request('POST', `/supplier-certificate/${supplier.hashId}`, { identifier: identifier(deviceType) });
    spy.mockRestore();
  });

  it('refusals say why and at which stage', async () => {
    const throws = await opensslDeviceCert(work, 'd2', '/CN=throws', supplier.cert, supplier.key);
    const r1 = await refusal(identifyCertificateDevice(api.ctx, [pem(throws.cert)]));
    expect(r1.stage).toBe('identifier');
    expect(r1.message).toContain('no such device');
    const foreign = await opensslDeviceCert(work, 'd3', '/CN=foreign-type', supplier.cert, supplier.key);
    const r2 = await refusal(identifyCertificateDevice(api.ctx, [pem(foreign.cert)]));
    expect(r2.stage).toBe('identifier');
    expect(r2.message).toContain('deviceTypeHashId nope');
    const expired = await opensslDeviceCert(work, 'd4', '/CN=old', supplier.cert, supplier.key, { expired: true });
    const r3 = await refusal(identifyCertificateDevice(api.ctx, [pem(expired.cert)]));
    expect(r3.stage).toBe('chain');
    expect(r3.message).toContain('expired');
  });

  it('dtlsCertificateOptions: the server key belongs to the chain; trust anchors follow supplier certificates', async () => {
    const opts = await dtlsCertificateOptions(api.ctx);
    const signature = sign('sha256', Buffer.from('hello'), opts.key);
    expect(verify('sha256', Buffer.from('hello'), createPublicKey(opts.chain[0].publicKey.export({ format: 'pem', type: 'spki' })), signature)).toBe(true);
    expect(opts.chain[0].checkIssued(opts.chain[1])).toBe(true);
    const fingerprints = () => opts.trustAnchors().map((c) => c.fingerprint256);
    expect(fingerprints()).toContain(pem(supplier.cert).fingerprint256);
    const csr = await opensslCsr(work, 'sup2', '/CN=Second supplier');
    const added = await a.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', {
      name: 's2',
      csr: csr.csrPem,
      identifier: identifier(deviceType),
    });
    const fp = new X509Certificate(added.body.certificate).fingerprint256;
    // trustAnchors never waits, and need not: the process that answered the add reloaded before answering
    expect(fingerprints()).toContain(fp);
    await a.request('DELETE', `/supplier-certificate/${added.body.hashId}`);
    expect(fingerprints()).not.toContain(fp);
  });
});

describe('trust anchors across processes', () => {
  it('a gateway process (its own context) sees a supplier certificate added through another process within about a second', async () => {
    const { currentTrust } = await import('../../src/connectivity/supplier-certificates/trust.ts');
    const { closeContext } = await import('../../src/context.ts');
    // one deployment: the same CERTS_DIR, database, Redis and QUEUE_NAME
    const gateway = await testContext({ CERTS_DIR: api.ctx.config.certsDir, QUEUE_NAME: api.ctx.config.queueName });
    try {
      const before = await currentTrust(gateway);
      const csr = await opensslCsr(work, 'xproc', '/CN=Cross process supplier');
      const added = await a.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', {
        name: 'x',
        csr: csr.csrPem,
        identifier: identifier(deviceType),
      });
      const fp = new X509Certificate(added.body.certificate).fingerprint256;
      expect(before.supplierByFingerprint.has(fp)).toBe(false);
      await vi.waitFor(async () => expect((await currentTrust(gateway)).supplierByFingerprint.has(fp)).toBe(true), { timeout: 3000, interval: 100 });
      await a.request('DELETE', `/supplier-certificate/${added.body.hashId}`);
      await vi.waitFor(async () => expect((await currentTrust(gateway)).supplierByFingerprint.has(fp)).toBe(false), { timeout: 3000, interval: 100 });
    } finally {
      await closeContext(gateway);
    }
  });
});
