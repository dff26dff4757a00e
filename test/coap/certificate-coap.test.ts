/**
 * Certificate devices over CoAP/DTLS (ECDHE-ECDSA): a device certificate under a supplier certificate needs no
 * registration; the supplier's identifier names the device, which is found or created. libcoap with -c/-j/-C.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { generate } from 'coap-packet';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { opensslCsr, opensslDeviceCert, run as runPki, tempDir } from '../pki/support.ts';
import { connectivityClient } from '../support/provision.ts';
import { report, run, runsLogging, startCoapWorld, storedAt, type CoapWorld } from './support.ts';

const identifierFor = (deviceTypeHashId: string) => `const DEVICE_TYPE = "${deviceTypeHashId}";
function handle(args: { certificate: { subjects: Subject[][] } }): { deviceTypeHashId: string; deviceIdentifier: string } {
  const cn = args.certificate.subjects[0].find((a) => a.key.value === 'CN');
  if (!cn || cn.value.value.startsWith('bad-')) throw new Error('unknown device ' + (cn ? cn.value.value : '?'));
  return { deviceTypeHashId: DEVICE_TYPE, deviceIdentifier: cn.value.value };
}`;

let world: CoapWorld;
let certsDir: string;
let work: string;
const supplier = { cert: '', key: '' };

beforeAll(async () => {
  certsDir = tempDir();
  work = tempDir();
  world = await startCoapWorld({ CERTS_DIR: certsDir });
  const csr = await opensslCsr(work, 'supplier', '/O=Acme devices/CN=Acme CoAP CA');
  const added = await world.api.request<{ certificate: string }>('POST', '/supplier-certificate/', {
    name: 'Acme',
    csr: csr.csrPem,
    identifier: identifierFor(world.deviceTypeHashId),
  });
  expect(added.status).toBe(200);
  supplier.key = csr.key;
  supplier.cert = path.join(work, 'supplier.pem');
  writeFileSync(supplier.cert, added.body.certificate);
});
afterAll(async () => {
  await world?.close();
});

async function devices(): Promise<{ hashId: string; supplierDeviceIdentifier: string }[]> {
  const r = await world.api.request<{ rows: { device: { hashId: string; supplierDeviceIdentifier: string } }[] }>('GET', '/device/?rowsPerPage=100');
  return r.body.rows.map((row) => row.device);
}

const coapPki = (bin: string, cert: { cert: string; key: string }, uri: string, args: string[]) =>
  run(bin, ['-B', '15', '-c', cert.cert, '-j', cert.key, '-C', path.join(certsDir, 'ca.pem'), ...args, `coaps://127.0.0.1:${world.coapsPort}${uri}`]);

describe('certificate devices over CoAP/DTLS', () => {
  describe('trust follows a supplier certificate at once (no handshake in between)', () => {
    const fresh = { hashId: '', cert: '', key: '', device: { cert: '', key: '' } };

    it('a device connects right after its supplier certificate is added: its first handshake succeeds', async () => {
      const csr = await opensslCsr(work, 'fresh', '/O=Fresh devices/CN=Fresh CoAP CA');
      // the device's certificate is ready beforehand, so nothing stands between the add's answer and the handshake
      const added = await world.api.request<{ hashId: string; certificate: string }>('POST', '/supplier-certificate/', {
        name: 'Fresh',
        csr: csr.csrPem,
        identifier: identifierFor(world.deviceTypeHashId),
      });
      expect(added.status).toBe(200);
      Object.assign(fresh, { hashId: added.body.hashId, cert: path.join(work, 'fresh.pem'), key: csr.key });
      writeFileSync(fresh.cert, added.body.certificate);
      const cn = `fresh-${Date.now()}`;
      fresh.device = await opensslDeviceCert(work, cn, `/CN=${cn}`, fresh.cert, fresh.key);
      const r = report(23);
      const res = await coapPki('coap-client-openssl', fresh.device, '/report', ['-m', 'post', '-t', '50', '-e', r.body]);
      expect(res.stdout, res.stdout + res.stderr).toContain('"ok":true');
      expect(JSON.parse(res.stdout)).toEqual({ ok: true, device: cn, m: r.m });
    });

    it("deleted: the device's open session is closed, and its next handshake is refused (unknown CA)", async () => {
      // a session held open (openssl s_client), its device known: a CoAP request answered over it first
      const child = spawn('openssl', [
        's_client',
        '-dtls1_2',
        '-quiet',
        '-nocommands',
        '-connect',
        `127.0.0.1:${world.coapsPort}`,
        '-cert',
        fresh.device.cert,
        '-key',
        fresh.device.key,
        '-CAfile',
        path.join(certsDir, 'ca.pem'),
      ]);
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString('latin1');
      });
      child.stdin.on('error', () => undefined);
      const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
      try {
        child.stdin.write(
          generate({
            code: '0.03',
            messageId: 7,
            token: Buffer.from('t1'),
            options: [{ name: 'Uri-Path', value: Buffer.from('echo') }],
            payload: Buffer.from('held'),
          }),
        );
        await vi.waitFor(() => expect(out).toContain('"pskIdentity":null'), { timeout: 10_000, interval: 20 });
        expect((await world.api.request('DELETE', `/supplier-certificate/${fresh.hashId}`)).status).toBe(204);
        // the gateway closes it (close_notify) without the device sending anything
        await exited;
      } finally {
        child.kill('SIGKILL');
      }
      const res = await coapPki('coap-client-openssl', fresh.device, '/report', ['-B', '4', '-m', 'post', '-t', '50', '-e', report(24).body]);
      expect(res.stdout).not.toContain('"ok"');
      expect(res.stdout + res.stderr).toMatch(/unknown CA/i);
    });
  });

  it.each(['coap-client-openssl', 'coap-client-gnutls'])(
    '%s -c/-j/-C: the device is created by the identifier, its report answered and stored',
    async (bin) => {
      const cn = `meter-${bin.endsWith('gnutls') ? 'g' : 'o'}-${Date.now()}`;
      const dev = await opensslDeviceCert(work, cn, `/O=Acme devices/CN=${cn}`, supplier.cert, supplier.key);
      const r = report(21);
      const res = await coapPki(bin, dev, '/report', ['-m', 'post', '-t', '50', '-e', r.body]);
      expect(JSON.parse(res.stdout), res.stdout + res.stderr).toEqual({ ok: true, device: cn, m: r.m });
      const created = (await devices()).filter((d) => d.supplierDeviceIdentifier === cn);
      expect(created).toHaveLength(1);
      expect(await storedAt(world, r.t, created[0].hashId)).toEqual([21000]);
      const runs = await runsLogging(world.api, `m=${r.m}`);
      expect(runs.map((a) => a.log[0].message)).toEqual([`coaps POST /report from ? {} m=${r.m}`]);
    },
  );

  it('the handler sees the verified chain as webRequest.certificate and no pskIdentity', async () => {
    const dev = await opensslDeviceCert(work, 'echo-dev', '/O=Acme devices/OU=meters/CN=meter-echo', supplier.cert, supplier.key);
    const res = await coapPki('coap-client-openssl', dev, '/echo', ['-m', 'put', '-t', '0', '-e', 'hello']);
    const echo = JSON.parse(res.stdout) as {
      pskIdentity: string | null;
      body: unknown;
      certificate: { subjects: { key: { value: string }; value: { value: string } }[][] };
    };
    expect(echo.pskIdentity).toBeNull();
    expect(echo.body).toEqual({ type: 'string', data: 'hello' });
    const cns = echo.certificate.subjects.map((s) => s.find((a) => a.key.value === 'CN')?.value.value);
    expect(cns).toEqual(['meter-echo', 'Acme CoAP CA', 'gridgate development device CA']);
  });

  it('an identifier that throws: the session stands, every request gets 4.01 with the reason, nothing is created or queued', async () => {
    const dev = await opensslDeviceCert(work, 'bad-dev', '/CN=bad-0007', supplier.cert, supplier.key);
    const res = await coapPki('coap-client-openssl', dev, '/report', ['-m', 'post', '-t', '50', '-e', '{}', '-v', '6']);
    expect(res.stdout).toContain('4.01');
    expect(res.stdout).toContain('unknown device bad-0007');
    expect((await devices()).map((d) => d.supplierDeviceIdentifier)).not.toContain('bad-0007');
  });

  it('a chain to nothing trusted fails the handshake: no answer, nothing created', async () => {
    const rogueKey = path.join(work, 'rogue.key');
    const rogueCert = path.join(work, 'rogue.pem');
    await runPki('openssl', [
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
      '/O=Acme devices/CN=Acme CoAP CA',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-keyout',
      rogueKey,
      '-out',
      rogueCert,
    ]);
    const rogue = await opensslDeviceCert(work, 'rogue-dev', '/CN=meter-rogue', rogueCert, rogueKey);
    const res = await coapPki('coap-client-openssl', rogue, '/report', ['-B', '4', '-m', 'post', '-t', '50', '-e', '{}']);
    expect(res.stdout).not.toContain('"ok"');
    expect((await devices()).map((d) => d.supplierDeviceIdentifier)).not.toContain('meter-rogue');
  });

  it('tenant isolation: a created device lives in the supplier environment only', async () => {
    const other = await connectivityClient(world.ctx.db, `http://127.0.0.1:${world.service.apiPort()}`);
    const r = await other.request<{ rows: unknown[] }>('GET', '/device/?rowsPerPage=100');
    expect(r.body.rows).toEqual([]);
    expect((await devices()).some((d) => d.supplierDeviceIdentifier.startsWith('meter-o-'))).toBe(true);
  });
});
