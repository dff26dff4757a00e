// Devices with certificates under a supplier certificate connect over HTTPS mutual TLS without any
// registration: the supplier's identifier names the device, which is found or created, and the
// request runs the device type's handler. The certificates either port refuses, and CoAP/DTLS
// refusing them in the handshake and at resumption. Real curl and openssl s_client, the running service.
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { compileOnSave } from '../../src/connectivity/user-code.ts';

import { Sandbox } from '../../src/sandbox/runner.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { httpRequestText, parseHttpResponse } from '../support/openssl.ts';
import { connectivityClient, type RestClient } from '../support/provision.ts';
import { curl, opensslCsr, opensslDeviceCert, run, tempDir } from './support.ts';

const HANDLER = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const r = args.event.webRequest;
  exec.addLog('certificate request ' + r.method + ' ' + r.url.path);
  return { statusCode: 200, body: { device: args.device.supplierDeviceIdentifier, hashId: args.device.hashId, body: r.body ?? null,
    subjects: r.certificate ? r.certificate.subjects : null, psk: r.pskIdentity ?? null } };
}`;

const identifierFor = (deviceTypeHashId: string) => `const DEVICE_TYPE = "${deviceTypeHashId}";
function handle(args: { certificate: { subjects: Subject[][] } }): { deviceTypeHashId: string; deviceIdentifier: string } {
  const cn = args.certificate.subjects[0].find((a) => a.key.value === 'CN');
  if (!cn || cn.value.value.startsWith('bad-')) throw new Error('unknown device ' + (cn ? cn.value.value : '?'));
  return { deviceTypeHashId: DEVICE_TYPE, deviceIdentifier: cn.value.value };
}`;

interface Answer {
  device: string;
  hashId: string;
  body: unknown;
  subjects: { key: { value: string }; value: { value: string } }[][];
  psk: string | null;
}

let ctx: AppContext;
let service: RunningService;
let api: RestClient;
let other: RestClient;
let certsDir: string;
let work: string;
let port: number;
let caPem: string;
const supplier = { hashId: '', cert: '', key: '' };

async function devices(client: RestClient): Promise<{ hashId: string; supplierDeviceIdentifier: string; deviceTypeHashId: string }[]> {
  const r = await client.request<{ rows: { device: { hashId: string; supplierDeviceIdentifier: string; deviceTypeHashId: string } }[] }>(
    'GET',
    '/device/?rowsPerPage=100',
  );
  return r.body.rows.map((row) => row.device);
}

async function newDeviceType(client: RestClient): Promise<string> {
  const type = await client.request<{ hashId: string }>('POST', '/device-type/', {
    name: 'certificate device',
    eventHandler: HANDLER,
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [],
    commandTypeHashIds: [],
  });
  expect(type.status).toBe(200);
  return type.body.hashId;
}

beforeAll(async () => {
  certsDir = tempDir();
  work = tempDir();
  ctx = await testContext({ CERTS_DIR: certsDir });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  caPem = path.join(certsDir, 'ca.pem');
  const base = `http://127.0.0.1:${service.apiPort()}`;
  api = await connectivityClient(ctx.db, base);
  other = await connectivityClient(ctx.db, base);
  const type = await api.request<{ hashId: string }>('POST', '/device-type/', {
    name: 'certificate device',
    eventHandler: HANDLER,
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [],
    commandTypeHashIds: [],
  });
  expect(type.status).toBe(200);
  // the supplier makes its key and CSR with openssl and gets its intermediate CA back
  const csr = await opensslCsr(work, 'supplier', '/O=Acme devices/CN=Acme device CA 1');
  const added = await api.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', {
    name: 'Acme',
    csr: csr.csrPem,
    identifier: identifierFor(type.body.hashId),
  });
  expect(added.status).toBe(200);
  supplier.hashId = added.body.hashId;
  supplier.key = csr.key;
  supplier.cert = path.join(work, 'supplier.pem');
  writeFileSync(supplier.cert, added.body.certificate);
});

afterAll(async () => {
  vi.restoreAllMocks();
  await service?.stop();
  if (ctx) await closeContext(ctx);
});

describe('certificate devices over HTTPS mutual TLS', () => {
  it('curl with a device certificate under the supplier certificate: the device is created and its handler answers, with the chain subjects', async () => {
    const dev = await opensslDeviceCert(work, 'dev-1', '/O=Acme devices/OU=meters/CN=meter-0001', supplier.cert, supplier.key);
    const res = await curl(`https://localhost:${port}/report?x=1`, { cacert: caPem, cert: dev.cert, key: dev.key, data: '{"v":42}' });
    expect(res.code, res.stderr).toBe(0);
    expect(res.status).toBe(200);
    const answer = JSON.parse(res.body) as Answer;
    expect(answer.device).toBe('meter-0001');
    expect(answer.body).toEqual({ type: 'json', data: { v: 42 } });
    expect(answer.psk).toBeNull();
    // the verified chain, device first: device, supplier certificate, device CA
    expect(answer.subjects).toHaveLength(3);
    expect(answer.subjects[0]).toEqual([
      { key: { encoding: 'utf8', value: 'O' }, value: { encoding: 'utf8', value: 'Acme devices' } },
      { key: { encoding: 'utf8', value: 'OU' }, value: { encoding: 'utf8', value: 'meters' } },
      { key: { encoding: 'utf8', value: 'CN' }, value: { encoding: 'utf8', value: 'meter-0001' } },
    ]);
    expect(answer.subjects[1].find((a) => a.key.value === 'CN')?.value.value).toBe('Acme device CA 1');
    expect(answer.subjects[2].find((a) => a.key.value === 'CN')?.value.value).toBe('gridgate development device CA');

    const created = (await devices(api)).filter((d) => d.supplierDeviceIdentifier === 'meter-0001');
    expect(created).toHaveLength(1);
    expect(created[0].hashId).toBe(answer.hashId);
    // the device lives in the supplier's environment only
    expect((await devices(other)).map((d) => d.supplierDeviceIdentifier)).not.toContain('meter-0001');
  });

  it('openssl s_client -cert (with the supplier certificate in the chain) reaches the same device; the identifier runs once per certificate, not per request', async () => {
    const spy = vi.spyOn(Sandbox.prototype, 'runIdentifier');
    const dev = await opensslDeviceCert(work, 'dev-2', '/CN=meter-0002', supplier.cert, supplier.key);
    const send = () =>
      run(
        'openssl',
        [
          's_client',
          '-connect',
          `127.0.0.1:${port}`,
          '-quiet',
          '-CAfile',
          caPem,
          '-verify_return_error',
          '-cert',
          dev.cert,
          '-key',
          dev.key,
          '-cert_chain',
          supplier.cert,
        ],
        httpRequestText('POST', '/a', '{"n":1}', 'application/json', false) + httpRequestText('POST', '/b', '{"n":2}'),
      );
    const first = await send();
    const answers = first.stdout.split(/(?=HTTP\/1\.1 )/).map(parseHttpResponse);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    const [a1, a2] = answers.map((a) => JSON.parse(a.body) as Answer);
    expect(a1.device).toBe('meter-0002');
    expect(a2.hashId).toBe(a1.hashId);
    const second = parseHttpResponse((await send()).stdout);
    expect((JSON.parse(second.body) as Answer).hashId).toBe(a1.hashId);
    expect(spy).toHaveBeenCalledTimes(1);
    spy.mockRestore();
    expect((await devices(api)).filter((d) => d.supplierDeviceIdentifier === 'meter-0002')).toHaveLength(1);
  });

  it('refused: a chain to nothing trusted and an expired certificate (the connection is closed); nothing is created', async () => {
    // a CA of its own, with the same names as the supplier's
    const rogueKey = path.join(work, 'rogue.key');
    const rogueCert = path.join(work, 'rogue.pem');
    await run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '30',
      '-subj',
      '/O=Acme devices/CN=Acme device CA 1',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-keyout',
      rogueKey,
      '-out',
      rogueCert,
    ]);
    const rogue = await opensslDeviceCert(work, 'rogue-dev', '/CN=meter-rogue', rogueCert, rogueKey);
    const untrusted = await curl(`https://localhost:${port}/report`, { cacert: caPem, cert: rogue.cert, key: rogue.key, data: '{}' });
    expect(untrusted.code).not.toBe(0);
    expect(untrusted.status).toBe(0);

    const expired = await opensslDeviceCert(work, 'old-dev', '/CN=meter-expired', supplier.cert, supplier.key, { expired: true });
    const old = await curl(`https://localhost:${port}/report`, { cacert: caPem, cert: expired.cert, key: expired.key, data: '{}' });
    expect(old.code).not.toBe(0);
    expect(old.status).toBe(0);

    const ids = (await devices(api)).map((d) => d.supplierDeviceIdentifier);
    expect(ids).not.toContain('meter-rogue');
    expect(ids).not.toContain('meter-expired');
  });

  // one rule for both device ports (src/pki/verify.ts): over DTLS the handshake itself fails
  it.each([
    ["a CA certificate as the device's", 'meter-ca', { ca: true }, 'unsupported certificate'],
    ['a certificate for servers only (extendedKeyUsage serverAuth)', 'meter-server', { extendedKeyUsage: 'serverAuth' }, 'unsupported certificate'],
    ['a device under a CA below the supplier certificate (pathlen 0)', 'meter-deep', 'below', 'unknown ca'],
  ] as const)('refused over HTTPS and over CoAP/DTLS: %s; nothing is created', async (_what, cn, kind, alert) => {
    let dev: { cert: string; key: string };
    let chain = supplier.cert;
    if (kind === 'below') {
      const sub = await opensslDeviceCert(work, `${cn}-ca`, `/CN=${cn} sub-supplier CA`, supplier.cert, supplier.key, { ca: true });
      dev = await opensslDeviceCert(work, cn, `/CN=${cn}`, sub.cert, sub.key);
      chain = path.join(work, `${cn}-chain.pem`);
      writeFileSync(chain, readFileSync(sub.cert, 'utf8') + readFileSync(supplier.cert, 'utf8'));
    } else {
      dev = await opensslDeviceCert(work, cn, `/CN=${cn}`, supplier.cert, supplier.key, kind);
    }
    // curl sends the chain its --cert file holds
    const withChain = path.join(work, `${cn}-full.pem`);
    writeFileSync(withChain, readFileSync(dev.cert, 'utf8') + readFileSync(chain, 'utf8'));
    const https = await curl(`https://localhost:${port}/report`, { cacert: caPem, cert: withChain, key: dev.key, data: '{}' });
    expect(https.code).not.toBe(0);
    expect(https.status).toBe(0);
    const dtls = await run(
      'openssl',
      [
        's_client',
        '-dtls1_2',
        '-connect',
        `127.0.0.1:${service.coap!.coapsPort()}`,
        '-CAfile',
        caPem,
        '-cipher',
        'ECDHE-ECDSA-AES128-CCM8',
        '-cert',
        dev.cert,
        '-key',
        dev.key,
        '-cert_chain',
        chain,
      ],
      '',
    );
    expect(dtls.stderr).toContain(`alert ${alert}`);
    expect((await devices(api)).map((d) => d.supplierDeviceIdentifier)).not.toContain(cn);
  });

  it('refused: an identifier that throws gets 401 with its message; a certificate straight under the device CA names no device', async () => {
    const bad = await opensslDeviceCert(work, 'bad-dev', '/CN=bad-0001', supplier.cert, supplier.key);
    const res = await curl(`https://localhost:${port}/report`, { cacert: caPem, cert: bad.cert, key: bad.key, data: '{}' });
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body)).toMatchObject({ key: 'authentication_error' });
    expect(JSON.parse(res.body).message).toContain('unknown device bad-0001');
    expect((await devices(api)).map((d) => d.supplierDeviceIdentifier)).not.toContain('bad-0001');

    const example = await curl(`https://localhost:${port}/report`, {
      cacert: caPem,
      cert: path.join(certsDir, 'device.pem'),
      key: path.join(certsDir, 'device.key'),
    });
    expect(example.status).toBe(401);
    expect(JSON.parse(example.body).message).toContain('not by a supplier certificate');
  });

  it('two live supplier certificates of one key, in two environments (stored before keys were kept unique): a device chain is refused over HTTPS and CoAP/DTLS, no device in either', async () => {
    const csr = await opensslCsr(work, 'twin', '/O=Twin devices/CN=Twin device CA');
    const added = await api.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', {
      name: 'twin',
      csr: csr.csrPem,
      identifier: identifierFor(await newDeviceType(api)),
    });
    expect(added.status).toBe(200);
    const twinCert = path.join(work, 'twin.pem');
    writeFileSync(twinCert, added.body.certificate);
    // the other environment's certificate of the same key and name, as the device CA signed it before the fix
    const csrFile = path.join(work, 'twin-again.csr');
    writeFileSync(csrFile, csr.csrPem);
    const ext = path.join(work, 'twin-again.ext');
    writeFileSync(ext, 'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,digitalSignature\n');
    const second = await run('openssl', [
      'x509',
      '-req',
      '-in',
      csrFile,
      '-CA',
      caPem,
      '-CAkey',
      path.join(certsDir, 'ca.key'),
      '-CAcreateserial',
      '-days',
      '30',
      '-extfile',
      ext,
    ]);
    expect(second.code).toBe(0);
    const otherEnv = (await ctx.db.query<{ id: string }>('SELECT id FROM environment WHERE hash_id = $1', [other.environmentHashId])).rows[0].id;
    const otherIdentifier = identifierFor(await newDeviceType(other));
    await ctx.db.query(
      `INSERT INTO supplier_certificate (hash_id, environment_id, name, certificate, fingerprint, identifier, identifier_hash)
       VALUES ($1, $2, 'twin', $3, $4, $5, $6)`,
      [
        `twin${Date.now()}`,
        otherEnv,
        second.stdout,
        new X509Certificate(second.stdout).fingerprint256,
        otherIdentifier,
        await compileOnSave(ctx.config.supplierCode, 'identifier', otherIdentifier, Number(otherEnv)),
      ],
    );
    await ctx.changes.publish('trust', { environmentIds: [Number(otherEnv)] });

    const dev = await opensslDeviceCert(work, 'twin-dev', '/CN=meter-twin', twinCert, csr.key);
    const https = await curl(`https://localhost:${port}/report`, { cacert: caPem, cert: dev.cert, key: dev.key, data: '{}' });
    expect(https.code).not.toBe(0);
    expect(https.status).toBe(0);
    const dtls = await run(
      'openssl',
      [
        's_client',
        '-dtls1_2',
        '-connect',
        `127.0.0.1:${service.coap!.coapsPort()}`,
        '-CAfile',
        caPem,
        '-cipher',
        'ECDHE-ECDSA-AES128-CCM8',
        '-cert',
        dev.cert,
        '-key',
        dev.key,
      ],
      '',
    );
    expect(dtls.stderr).toContain('alert access denied');
    expect((await devices(api)).map((d) => d.supplierDeviceIdentifier)).not.toContain('meter-twin');
    expect((await devices(other)).map((d) => d.supplierDeviceIdentifier)).not.toContain('meter-twin');
  });

  it('a deleted supplier certificate stops its devices at once', async () => {
    const csr = await opensslCsr(work, 'short-lived', '/CN=Short lived supplier');
    const type = (await devices(api))[0].deviceTypeHashId;
    const added = await api.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', {
      name: 'short',
      csr: csr.csrPem,
      identifier: identifierFor(type),
    });
    const cert = path.join(work, 'short-lived.pem');
    writeFileSync(cert, added.body.certificate);
    const dev = await opensslDeviceCert(work, 'short-dev', '/CN=meter-short', cert, csr.key);
    expect((await curl(`https://localhost:${port}/r`, { cacert: caPem, cert: dev.cert, key: dev.key, data: '{}' })).status).toBe(200);
    expect((await api.request('DELETE', `/supplier-certificate/${added.body.hashId}`)).status).toBe(204);
    const after = await curl(`https://localhost:${port}/r`, { cacert: caPem, cert: dev.cert, key: dev.key, data: '{}' });
    expect(after.status).toBe(0);
  });

  it('a CoAP/DTLS session of a device whose supplier certificate was deleted is not resumed (the device CA still signs that certificate)', async () => {
    const csr = await opensslCsr(work, 'resumer', '/CN=Resuming supplier');
    const type = await newDeviceType(api);
    const added = await api.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', {
      name: 'resumer',
      csr: csr.csrPem,
      identifier: identifierFor(type),
    });
    const cert = path.join(work, 'resumer.pem');
    writeFileSync(cert, added.body.certificate);
    const dev = await opensslDeviceCert(work, 'resumer-dev', '/CN=meter-resumer', cert, csr.key);
    const sessionFile = path.join(work, 'resumer-session.pem');
    const connect = (resume: boolean) =>
      run(
        'openssl',
        [
          's_client',
          '-dtls1_2',
          '-connect',
          `127.0.0.1:${service.coap!.coapsPort()}`,
          '-CAfile',
          caPem,
          '-cipher',
          'ECDHE-ECDSA-AES128-CCM8',
          '-cert',
          dev.cert,
          '-key',
          dev.key,
          '-cert_chain',
          cert,
          resume ? '-sess_in' : '-sess_out',
          sessionFile,
        ],
        '',
      );
    expect((await connect(false)).stdout).toContain('New, TLSv1.2');
    expect((await connect(true)).stdout).toContain('Reused, TLSv1.2');
    expect((await api.request('DELETE', `/supplier-certificate/${added.body.hashId}`)).status).toBe(204);
    const after = await connect(true);
    expect(after.stdout).not.toContain('Reused, ');
    expect(after.stderr).toContain('alert unknown ca');
  });
});
