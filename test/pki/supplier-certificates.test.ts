import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureCertificates } from '../../src/pki/files.ts';
import { currentTrust } from '../../src/connectivity/supplier-certificates/trust.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError, findAll } from '../connectivity/fixtures.ts';
import { opensslCsr, run, tempDir } from './support.ts';

export const IDENTIFIER = `function handle(args: { certificate: { subjects: Subject[][] } }) {
  const cn = args.certificate.subjects[0].find((a) => a.key.value === 'CN');
  return { deviceTypeHashId: 'x', deviceIdentifier: cn!.value.value };
}`;

let api: TestApi;
let a: ApiClient;
let b: ApiClient;
let certsDir: string;
let work: string;

beforeAll(async () => {
  certsDir = tempDir();
  work = tempDir();
  const ctx = await testContext({ CERTS_DIR: certsDir });
  await ensureCertificates(ctx.config);
  api = await startTestApi(ctx);
  a = await api.login('connectivity');
  b = await api.login('connectivity');
});
afterAll(async () => api?.close());

async function addCertificate(client: ApiClient, name: string, subject = `/O=Acme/CN=${name}`) {
  const { csrPem } = await opensslCsr(work, name, subject);
  return client.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', { name, csr: csrPem, identifier: IDENTIFIER });
}

/** Another CSR of the key that addCertificate made for `name` (only the key's holder can sign one). */
async function sameKeyCsr(name: string, subject: string): Promise<string> {
  const r = await run('openssl', ['req', '-new', '-key', path.join(work, `${name}.key`), '-subj', subject]);
  if (r.code !== 0) throw new Error(r.stderr);
  return r.stdout;
}

describe('supplier certificates', () => {
  it('add signs the CSR as an intermediate CA (CA, pathlen 0, keyCertSign) under the device CA; get/find/update/delete in SDK shapes', async () => {
    const added = await addCertificate(a, 'acme-sensors');
    expect(added.status).toBe(200);
    expect(Object.keys(added.body).sort()).toEqual(['certificate', 'hashId']);
    const pem = path.join(work, 'issued.pem');
    writeFileSync(pem, added.body.certificate);
    expect((await run('openssl', ['verify', '-CAfile', path.join(certsDir, 'ca.pem'), pem])).stdout).toContain(': OK');
    const text = (await run('openssl', ['x509', '-in', pem, '-noout', '-text'])).stdout;
    expect(text).toMatch(/CA:TRUE, pathlen:0/);
    expect(text).toMatch(/Key Usage: critical\s+Digital Signature, Certificate Sign, CRL Sign/);
    const cert = new X509Certificate(added.body.certificate);
    expect(cert.subject).toBe('O=Acme\nCN=acme-sensors');
    expect(cert.issuer).toContain('CN=gridgate development device CA');

    const got = await a.request<{ certificate: Record<string, unknown>; identifier: string }>('GET', `/supplier-certificate/${added.body.hashId}`);
    expect(got.status).toBe(200);
    expect(got.body.identifier).toBe(IDENTIFIER);
    expect(got.body.certificate).toMatchObject({ hashId: added.body.hashId, name: 'acme-sensors', certificate: added.body.certificate });
    expect(Number.isNaN(Date.parse(got.body.certificate.createdAt as string))).toBe(false);

    await addCertificate(a, 'acme-meters');
    const rows = await findAll<{ certificate: Record<string, unknown> }>(a, '/supplier-certificate/?sortBy=name&descending=false', 1);
    expect(rows.map((r) => r.certificate.name)).toEqual(['acme-meters', 'acme-sensors']);
    expect(Object.keys(rows[0].certificate).sort()).toEqual(['createdAt', 'hashId', 'name']);
    const searched = await a.request<{ rows: { certificate: { name: string } }[] }>('GET', '/supplier-certificate/?search=meters');
    expect(searched.body.rows.map((r) => r.certificate.name)).toEqual(['acme-meters']);

    const newIdentifier = IDENTIFIER.replace("'x'", "'y'");
    expect((await a.request('POST', `/supplier-certificate/${added.body.hashId}`, { name: 'renamed', identifier: newIdentifier })).status).toBe(204);
    const after = await a.request<{ certificate: { name: string; certificate: string }; identifier: string }>(
      'GET',
      `/supplier-certificate/${added.body.hashId}`,
    );
    expect(after.body).toMatchObject({ certificate: { name: 'renamed', certificate: added.body.certificate }, identifier: newIdentifier });

    expect((await a.request('DELETE', `/supplier-certificate/${added.body.hashId}`)).status).toBe(204);
    expect((await a.request('GET', `/supplier-certificate/${added.body.hashId}`)).status).toBe(404);
    expect((await a.request('DELETE', `/supplier-certificate/${added.body.hashId}`)).status).toBe(404);
    const left = await findAll<{ certificate: { name: string } }>(a, '/supplier-certificate/');
    expect(left.map((r) => r.certificate.name)).toEqual(['acme-meters']);
  });

  it('a live supplier certificate is a trust anchor at once; a deleted one is not', async () => {
    const added = await addCertificate(a, 'anchor-test');
    const fingerprint = new X509Certificate(added.body.certificate).fingerprint256;
    expect((await currentTrust(api.ctx)).supplierByFingerprint.get(fingerprint)?.hashId).toBe(added.body.hashId);
    await a.request('DELETE', `/supplier-certificate/${added.body.hashId}`);
    expect((await currentTrust(api.ctx)).supplierByFingerprint.has(fingerprint)).toBe(false);
  });

  it('limits and bad input: parameter_error naming the field', async () => {
    const { csrPem } = await opensslCsr(work, 'limits', '/CN=limits');
    const body = { name: 'n', csr: csrPem, identifier: IDENTIFIER };
    expectParameterError(await a.request('POST', '/supplier-certificate/', { ...body, name: 'n'.repeat(256) }), 'name', '255');
    expectParameterError(await a.request('POST', '/supplier-certificate/', { ...body, name: '' }), 'name');
    expectParameterError(await a.request('POST', '/supplier-certificate/', { ...body, csr: 'x'.repeat(16_385) }), 'csr', '16384');
    expectParameterError(await a.request('POST', '/supplier-certificate/', { ...body, identifier: 'x'.repeat(1_000_001) }), 'identifier', '1000000');
    expectParameterError(await a.request('POST', '/supplier-certificate/', { name: 'n', csr: csrPem }), 'identifier', 'required');
    expectParameterError(await a.request('POST', '/supplier-certificate/', { ...body, extra: 1 }), 'extra');
    expectParameterError(await a.request('POST', '/supplier-certificate/', { ...body, csr: 'not a csr' }), 'csr', 'PKCS#10');
    // a CSR whose signature was tampered with
    const der = Buffer.from(csrPem.replace(/-----[^-]+-----/g, '').replace(/\s/g, ''), 'base64');
    der[der.length - 1] ^= 0x01;
    const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    expectParameterError(await a.request('POST', '/supplier-certificate/', { ...body, csr: tampered }), 'csr', 'signature');
    // a key too weak for the device ports
    const weakKey = path.join(work, 'weak.key');
    await run('openssl', ['genrsa', '-out', weakKey, '1024']);
    const weak = await run('openssl', ['req', '-new', '-key', weakKey, '-subj', '/CN=weak']);
    expectParameterError(await a.request('POST', '/supplier-certificate/', { ...body, csr: weak.stdout }), 'csr', '2048');
    // the identifier is compiled on save: line and column of the error
    expectParameterError(
      await a.request('POST', '/supplier-certificate/', { ...body, identifier: 'function handle(args) {\n  return {;\n}' }),
      'identifier',
      'line 2',
    );
    expectParameterError(await a.request('POST', '/supplier-certificate/', { ...body, identifier: 'const x = 1;' }), 'identifier');
    const added = await addCertificate(a, 'limits-update');
    expectParameterError(await a.request('POST', `/supplier-certificate/${added.body.hashId}`, { identifier: 'function handle( {' }), 'identifier');
    expectParameterError(await a.request('POST', `/supplier-certificate/${added.body.hashId}`, { csr: csrPem }), 'csr', 'not allowed');
    // nothing half-applied: the certificate keeps its identifier
    expect((await a.request<{ identifier: string }>('GET', `/supplier-certificate/${added.body.hashId}`)).body.identifier).toBe(IDENTIFIER);
  });

  it('tenant isolation: another environment neither sees nor touches them', async () => {
    const added = await addCertificate(a, 'private');
    const id = added.body.hashId;
    expect((await b.request('GET', `/supplier-certificate/${id}`)).status).toBe(404);
    expect((await b.request('POST', `/supplier-certificate/${id}`, { name: 'stolen' })).status).toBe(404);
    expect((await b.request('DELETE', `/supplier-certificate/${id}`)).status).toBe(404);
    expect((await findAll<{ certificate: { hashId: string } }>(b, '/supplier-certificate/')).map((r) => r.certificate.hashId)).not.toContain(id);
    expect((await a.request<{ certificate: { name: string } }>('GET', `/supplier-certificate/${id}`)).body.certificate.name).toBe('private');
  });

  it('tenant isolation: a key certified in one environment is refused in another (parameter_error naming csr), which is not named', async () => {
    const first = await addCertificate(a, 'shared-key');
    expect(first.status).toBe(200);
    const again = await sameKeyCsr('shared-key', '/O=Other tenant/CN=shared-key');
    const refused = await b.request<{ message: string }>('POST', '/supplier-certificate/', { name: 'copy', csr: again, identifier: IDENTIFIER });
    expectParameterError(refused, 'csr', 'already certified', 'another environment');
    expect(refused.body.message).not.toContain(first.body.hashId);
    expect(await findAll(b, '/supplier-certificate/')).toEqual([]);
    // nor twice in one environment, where the certificate is named
    expectParameterError(await a.request('POST', '/supplier-certificate/', { name: 'twice', csr: again, identifier: IDENTIFIER }), 'csr', first.body.hashId);
  });

  it('two adds of one key at once, in two environments: exactly one is certified', async () => {
    const { key, csrPem } = await opensslCsr(work, 'racing-key', '/CN=racing-key');
    const again = (await run('openssl', ['req', '-new', '-key', key, '-subj', '/CN=racing-key'])).stdout;
    const results = await Promise.all([
      a.request('POST', '/supplier-certificate/', { name: 'race', csr: csrPem, identifier: IDENTIFIER }),
      b.request('POST', '/supplier-certificate/', { name: 'race', csr: again, identifier: IDENTIFIER }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 400]);
    const live = await api.ctx.db.query('SELECT 1 FROM supplier_certificate WHERE name = $1 AND deleted_at IS NULL', ['race']);
    expect(live.rows).toHaveLength(1);
  });

  it('a key is free again once its supplier certificate is deleted', async () => {
    const first = await addCertificate(a, 'freed-key');
    expect((await a.request('DELETE', `/supplier-certificate/${first.body.hashId}`)).status).toBe(204);
    const again = await b.request('POST', '/supplier-certificate/', {
      name: 'freed',
      csr: await sameKeyCsr('freed-key', '/CN=freed-key'),
      identifier: IDENTIFIER,
    });
    expect(again.status).toBe(200);
    await b.request('DELETE', `/supplier-certificate/${(again.body as { hashId: string }).hashId}`);
  });

  it('a supplier certificate stored before keys were recorded still holds its key', async () => {
    const first = await addCertificate(a, 'older-key');
    await api.ctx.db.query('UPDATE supplier_certificate SET public_key_sha256 = NULL WHERE hash_id = $1', [first.body.hashId]);
    const refused = await b.request('POST', '/supplier-certificate/', {
      name: 'copy',
      csr: await sameKeyCsr('older-key', '/CN=older-key'),
      identifier: IDENTIFIER,
    });
    expectParameterError(refused, 'csr', 'already certified');
  });

  it('needs ENVIRONMENT_ADMIN of a connectivity environment', async () => {
    const monitoring = await api.login('monitoring');
    expect((await monitoring.request('GET', '/supplier-certificate/')).status).toBe(403);
  });
});
