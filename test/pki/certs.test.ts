import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ensureCertificates, loadServerCredentials } from '../../src/pki/files.ts';

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'gridgate-certs-'));
const openssl = (...args: string[]) => execFileSync('openssl', args, { encoding: 'utf8' });

describe('npm run certs (ensureCertificates)', () => {
  it('creates a P-256 CA, a server certificate naming localhost/127.0.0.1/::1 and PUBLIC_HOST, and a device certificate, both chained to the CA', async () => {
    const dir = tmp();
    const written = await ensureCertificates({ certsDir: dir, publicHost: 'gw.example.com' });
    expect(written.sort()).toEqual(['ca.key', 'ca.pem', 'device.key', 'device.pem', 'server.key', 'server.pem']);
    const f = (n: string) => path.join(dir, n);
    expect(openssl('verify', '-CAfile', f('ca.pem'), f('server.pem'), f('device.pem'))).toContain('server.pem: OK');
    expect(openssl('verify', '-CAfile', f('ca.pem'), '-purpose', 'sslclient', f('device.pem'))).toContain('device.pem: OK');
    const ca = new X509Certificate(readFileSync(f('ca.pem')));
    expect(ca.ca).toBe(true);
    expect(ca.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    const server = new X509Certificate(readFileSync(f('server.pem')));
    for (const host of ['localhost', 'gw.example.com']) expect(server.checkHost(host)).toBe(host);
    expect(server.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(server.checkIP('::1')).toBeDefined();
    expect(statSync(f('ca.key')).mode & 0o777).toBe(0o600);
    expect(statSync(f('server.key')).mode & 0o777).toBe(0o600);

    const creds = loadServerCredentials({ certsDir: dir });
    expect(creds.chain.map((c) => c.subject)).toEqual([server.subject, ca.subject]);
    expect(creds.deviceCa.fingerprint256).toBe(ca.fingerprint256);
  });

  it('is idempotent, reissues only the server certificate for a new host, and everything for a new CA', async () => {
    const dir = tmp();
    await ensureCertificates({ certsDir: dir });
    const caBefore = readFileSync(path.join(dir, 'ca.pem'), 'utf8');
    expect(await ensureCertificates({ certsDir: dir })).toEqual([]);
    expect(await ensureCertificates({ certsDir: dir, publicHost: '10.1.2.3' })).toEqual(['server.pem', 'server.key']);
    expect(readFileSync(path.join(dir, 'ca.pem'), 'utf8')).toBe(caBefore);
    expect(new X509Certificate(readFileSync(path.join(dir, 'server.pem'))).checkIP('10.1.2.3')).toBe('10.1.2.3');
    execFileSync('rm', [path.join(dir, 'ca.key')]);
    expect((await ensureCertificates({ certsDir: dir })).sort()).toEqual(['ca.key', 'ca.pem', 'device.key', 'device.pem', 'server.key', 'server.pem']);
  });

  it('concurrent starts (parallel processes sharing CERTS_DIR) end with one consistent set', async () => {
    const dir = tmp();
    await Promise.all([ensureCertificates({ certsDir: dir }), ensureCertificates({ certsDir: dir }), ensureCertificates({ certsDir: dir })]);
    const f = (n: string) => path.join(dir, n);
    expect(openssl('verify', '-CAfile', f('ca.pem'), f('server.pem'), f('device.pem'))).toContain('device.pem: OK');
    // the key belongs to the certificate
    const pub = (args: string[]) => execFileSync('openssl', args, { encoding: 'utf8' });
    expect(pub(['pkey', '-in', f('server.key'), '-pubout'])).toBe(pub(['x509', '-in', f('server.pem'), '-noout', '-pubkey']));
  });

  it('npm run certs runs the script with CERTS_DIR and PUBLIC_HOST from the environment, and says when nothing was to do', () => {
    const dir = tmp();
    const env = { ...process.env, CERTS_DIR: dir, PUBLIC_HOST: 'devices.example.org', DATA_DIR: tmp() };
    const first = execFileSync('npm', ['run', '-s', 'certs'], { encoding: 'utf8', env, cwd: path.resolve(import.meta.dirname, '../..') });
    expect(first).toContain('wrote ca.pem, ca.key, server.pem, server.key, device.pem, device.key');
    expect(new X509Certificate(readFileSync(path.join(dir, 'server.pem'))).checkHost('devices.example.org')).toBe('devices.example.org');
    const second = execFileSync('npm', ['run', '-s', 'certs'], { encoding: 'utf8', env, cwd: path.resolve(import.meta.dirname, '../..') });
    expect(second).toContain('certificates present and valid');
  });

  it('says what to do when the files are missing', () => {
    expect(() => loadServerCredentials({ certsDir: tmp() })).toThrow(/npm run certs/);
  });
});
