/**
 * ECDHE_ECDSA with client certificates against openssl s_client -dtls1_2 and gnutls-cli --udp, with a throwaway PKI
 * (test/dtls/pki.ts): both suites echo, chains through an intermediate, PSK preferred, trust anchors changed at
 * runtime, resumption of certificate sessions, and refusals (untrusted chain, expired, no certificate).
 */
import { spawn } from 'node:child_process';
import type { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { IDENTITY, PSK_HEX, gnutlsClient, startEchoServer, waitFor } from './helpers.ts';
import type { EchoServer } from './helpers.ts';
import { until } from '../support/until.ts';
import { makeTestPki } from './pki.ts';
import type { TestPki } from './pki.ts';

let pki: TestPki;
let srv: EchoServer | undefined;
let anchors: X509Certificate[] = [];
beforeAll(() => {
  pki = makeTestPki();
});
afterAll(() => pki.remove());
afterEach(async () => {
  await srv?.server.close();
  srv = undefined;
});

/** A server trusting `names` (the device CA alone by default; the gateway adds its supplier certificates, here `inter`). */
async function certServer(names = ['ca']): Promise<EchoServer> {
  anchors = names.map((n) => pki.cert(n));
  srv = await startEchoServer({ certificate: { key: pki.read('server.key'), chain: pki.read('server.pem'), trustAnchors: () => anchors } });
  return srv;
}

/** openssl s_client -dtls1_2 with a client certificate; writes `line`, waits for its echo, then closes stdin. */
function opensslCert(o: {
  port: number;
  device?: string;
  cipher: string;
  line?: string;
  extra?: string[];
}): Promise<{ stdout: string; stderr: string; echoed: boolean }> {
  const line = o.line ?? 'hello cert';
  const args = ['s_client', '-dtls1_2', '-connect', `127.0.0.1:${o.port}`, '-CAfile', pki.pem('ca'), '-verify_return_error', '-cipher', o.cipher];
  if (o.device) args.push('-cert', pki.pem(o.device), '-key', pki.key(o.device));
  const child = spawn('openssl', [...args, ...(o.extra ?? [])]);
  let stdout = '';
  let stderr = '';
  let echoed = false;
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    if (!echoed && stdout.includes(`echo:${line}\n`)) {
      echoed = true;
      child.stdin.end(); // s_client then sends close_notify and exits
    }
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdin.on('error', () => {});
  child.stdin.write(`${line}\n`);
  const timer = setTimeout(() => child.kill('SIGKILL'), 8000);
  return new Promise((resolve) =>
    child.on('close', () => {
      clearTimeout(timer);
      resolve({ stdout, stderr, echoed });
    }),
  );
}

describe('DTLS ECDHE_ECDSA ↔ openssl s_client -dtls1_2 -cert -key -CAfile', () => {
  it.each([
    ['ECDHE-ECDSA-AES128-CCM8', 'TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8'],
    ['ECDHE-ECDSA-AES128-GCM-SHA256', 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256'],
  ])('%s: the server chain verifies, the device certificate is verified, data is echoed', async (cipher, suite) => {
    await certServer();
    const res = await opensslCert({ port: srv!.port, device: 'device', cipher, line: `via ${cipher}` });
    expect(res.stdout).toContain('Verify return code: 0 (ok)');
    expect(res.stdout).toContain(`echo:via ${cipher}\n`);
    expect(srv!.sessions).toHaveLength(1);
    const s = srv!.sessions[0];
    expect(s.cipherSuite).toBe(suite);
    expect(s.peerCertificates[0].subject).toBe('CN=device-cert-1');
    expect(s.pskIdentity).toBeUndefined();
    expect(s.ecdheGroup).toBe('x25519'); // openssl offers x25519 first
    expect(srv!.errors).toEqual([]);
  });

  it('a client limited to P-256 (-curves prime256v1) gets a secp256r1 key exchange', async () => {
    await certServer();
    const res = await opensslCert({ port: srv!.port, device: 'device', cipher: 'ECDHE-ECDSA-AES128-CCM8', extra: ['-curves', 'prime256v1'] });
    expect(res.stdout).toContain('Server Temp Key: ECDH, prime256v1, 256 bits');
    expect(res.echoed).toBe(true);
    expect(srv!.sessions[0].ecdheGroup).toBe('secp256r1');
  });

  it('a device of the intermediate (supplier) CA, sending its chain, is accepted while the intermediate is an anchor; peerCertificates lists device first', async () => {
    await certServer(['ca', 'inter']);
    const res = await opensslCert({ port: srv!.port, device: 'device2', cipher: 'ECDHE-ECDSA-AES128-CCM8', extra: ['-cert_chain', pki.pem('inter')] });
    expect(res.echoed).toBe(true);
    const subjects = srv!.sessions[0].peerCertificates.map((c) => c.subject);
    expect(subjects.slice(0, 2)).toEqual(['CN=device-of-supplier', 'CN=Test Supplier CA']);
  });

  it('an intermediate the device sends is not trusted on its own: only what an anchor signed directly is (as on the HTTPS port)', async () => {
    await certServer(['ca']);
    const res = await opensslCert({ port: srv!.port, device: 'device2', cipher: 'ECDHE-ECDSA-AES128-CCM8', extra: ['-cert_chain', pki.pem('inter')] });
    expect(res.echoed).toBe(false);
    expect(res.stderr).toContain('alert unknown ca');
    await until(
      async () => srv!.errors.length,
      (n) => n > 0,
      'the handshake error',
    );
    expect(srv!.sessions).toEqual([]);
  });

  it('PSK suites stay preferred when a client offers PSK and certificate suites', async () => {
    await certServer();
    const res = await opensslCert({
      port: srv!.port,
      device: 'device',
      cipher: 'ECDHE-ECDSA-AES128-CCM8:PSK-AES128-CCM8:@SECLEVEL=0',
      extra: ['-psk', PSK_HEX, '-psk_identity', IDENTITY],
    });
    expect(res.echoed).toBe(true);
    expect(srv!.sessions[0].cipherSuite).toBe('TLS_PSK_WITH_AES_128_CCM_8');
    expect(srv!.sessions[0].pskIdentity).toBe(IDENTITY);
  });

  it.each([
    ['stranger', 'unknown ca', /not signed directly by a trusted certificate/],
    ['expired', 'certificate expired', /expired on/],
  ])('refuses a %s device with a fatal alert (%s) and a handshakeError; no session', async (device, alert, message) => {
    await certServer();
    const res = await opensslCert({ port: srv!.port, device, cipher: 'ECDHE-ECDSA-AES128-CCM8' });
    expect(res.echoed).toBe(false);
    expect(res.stderr).toContain(`alert ${alert}`);
    await waitFor(() => srv!.errors.length > 0);
    expect(srv!.errors[0].err.message).toMatch(message);
    expect(srv!.errors[0].info.certificateSubject).toBe(pki.cert(device).subject);
    expect(srv!.sessions).toEqual([]);
  });

  // the HTTPS port's rules (src/pki/verify.ts), although each of these chains leads to a trusted certificate
  it.each([
    ["a CA certificate as the device's", 'ca-device', [], 'unsupported certificate', /CA certificate/],
    ['a certificate for servers only (extendedKeyUsage serverAuth)', 'server-only', [], 'unsupported certificate', /clientAuth/],
    ['a device under a CA the supplier certificate (pathlen 0) may not issue', 'device3', ['sub', 'inter'], 'unknown ca', /signed directly/],
  ])('refuses %s: fatal alert, handshakeError, no session', async (_what, device, chain, alert, message) => {
    await certServer(['ca', 'inter']);
    const extra = chain.length === 0 ? [] : ['-cert_chain', join(pki.dir, `${device}-chain.pem`)];
    if (chain.length > 0) writeFileSync(extra[1], chain.map((n) => pki.read(`${n}.pem`)).join(''));
    const res = await opensslCert({ port: srv!.port, device, cipher: 'ECDHE-ECDSA-AES128-CCM8', extra });
    expect(res.echoed).toBe(false);
    expect(res.stderr).toContain(`alert ${alert}`);
    await until(
      async () => srv!.errors.length,
      (n) => n > 0,
      'the handshake error',
    );
    expect(srv!.errors[0].err.message).toMatch(message);
    expect(srv!.sessions).toEqual([]);
  });

  it('refuses a client without a certificate (handshake_failure)', async () => {
    await certServer();
    const res = await opensslCert({ port: srv!.port, cipher: 'ECDHE-ECDSA-AES128-CCM8' });
    expect(res.echoed).toBe(false);
    expect(res.stderr).toContain('alert handshake failure');
    await waitFor(() => srv!.errors.length > 0);
    expect(srv!.sessions).toEqual([]);
  });

  it('trust anchors are read at each handshake: removing the CA refuses the device, adding it back accepts it', async () => {
    await certServer();
    anchors = [pki.cert('rogue')];
    expect((await opensslCert({ port: srv!.port, device: 'device', cipher: 'ECDHE-ECDSA-AES128-CCM8' })).echoed).toBe(false);
    anchors = [pki.cert('rogue'), pki.cert('ca')];
    expect((await opensslCert({ port: srv!.port, device: 'device', cipher: 'ECDHE-ECDSA-AES128-CCM8' })).echoed).toBe(true);
  });

  it('a certificate session resumes with its peer certificates, but not once its CA is no longer trusted', async () => {
    await certServer();
    const file = join(pki.dir, 'sess.pem');
    const cipher = 'ECDHE-ECDSA-AES128-CCM8';
    expect((await opensslCert({ port: srv!.port, device: 'device', cipher, extra: ['-sess_out', file] })).echoed).toBe(true);
    const again = await opensslCert({ port: srv!.port, device: 'device', cipher, line: 'resumed', extra: ['-sess_in', file] });
    expect(again.stdout).toContain('Reused, ');
    expect(again.echoed).toBe(true);
    await waitFor(() => srv!.sessions.length === 2);
    expect(srv!.sessions[1].resumed).toBe(true);
    expect(srv!.sessions[1].peerCertificates[0].subject).toBe('CN=device-cert-1');
    anchors = [];
    const refused = await opensslCert({ port: srv!.port, device: 'device', cipher, line: 'nope', extra: ['-sess_in', file] });
    expect(refused.stdout).not.toContain('Reused, ');
    expect(refused.echoed).toBe(false);
    expect(srv!.sessions).toHaveLength(2);
  });

  it("a supplier's device does not resume once the supplier certificate is no longer an anchor, though the device CA still signs it", async () => {
    await certServer(['ca', 'inter']);
    const file = join(pki.dir, 'sess-supplier.pem');
    const cipher = 'ECDHE-ECDSA-AES128-CCM8';
    const extra = ['-cert_chain', pki.pem('inter')];
    expect((await opensslCert({ port: srv!.port, device: 'device2', cipher, extra: [...extra, '-sess_out', file] })).echoed).toBe(true);
    const again = await opensslCert({ port: srv!.port, device: 'device2', cipher, line: 'resumed', extra: [...extra, '-sess_in', file] });
    expect(again.stdout).toContain('Reused, ');
    expect(again.echoed).toBe(true);
    await until(
      async () => srv!.sessions.length,
      (n) => n === 2,
      'the resumed session',
    );
    anchors = [pki.cert('ca')]; // the supplier certificate deleted
    const refused = await opensslCert({ port: srv!.port, device: 'device2', cipher, line: 'nope', extra: [...extra, '-sess_in', file] });
    expect(refused.stdout).not.toContain('Reused, ');
    expect(refused.echoed).toBe(false);
    expect(srv!.sessions).toHaveLength(2);
  });
});

describe('DTLS ECDHE_ECDSA ↔ gnutls-cli --udp with certificates', () => {
  const args = (device: string, cipher: string): string[] => [
    '--priority',
    `NORMAL:-VERS-ALL:+VERS-DTLS1.2:-KX-ALL:+ECDHE-ECDSA:-CIPHER-ALL:+${cipher}`,
    '--x509cafile',
    pki.pem('ca'),
    '--x509certfile',
    pki.pem(device),
    '--x509keyfile',
    pki.key(device),
  ];

  it.each([
    ['AES-128-CCM-8', 'TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8'],
    ['AES-128-GCM', 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256'],
  ])('%s: server certificate verified by gnutls, device certificate by the server, data echoed', async (cipher, suite) => {
    await certServer();
    const res = await gnutlsClient({ port: srv!.port, args: args('device', cipher), line: `gnutls ${cipher}` });
    expect(res.stdout).toContain('- Status: The certificate is trusted.');
    expect(res.stdout).toContain('- Successfully sent 1 certificate(s) to server.');
    expect(res.stdout).toContain(`echo:gnutls ${cipher}\n`);
    expect(srv!.sessions[0].cipherSuite).toBe(suite);
    expect(srv!.sessions[0].peerCertificates[0].subject).toBe('CN=device-cert-1');
  });

  it('a device of an untrusted CA is refused: gnutls gets the fatal alert, no session', async () => {
    await certServer();
    const res = await gnutlsClient({ port: srv!.port, args: args('stranger', 'AES-128-CCM-8'), timeoutMs: 5000 });
    expect(res.echoed).toBe(false);
    expect(res.stdout + res.stderr).toContain('Received alert [48]');
    await waitFor(() => srv!.errors.length > 0);
    expect(srv!.sessions).toEqual([]);
  });
});
