/** The DTLS server against gnutls-cli --udp (GnuTLS 3.7): PSK CCM_8, resumption, wrong key. */
import { afterEach, describe, expect, it } from 'vitest';
import { IDENTITY, PSK_HEX, gnutlsClient, startEchoServer, waitFor } from './helpers.ts';
import type { EchoServer } from './helpers.ts';

let srv: EchoServer | undefined;
afterEach(async () => {
  await srv?.server.close();
  srv = undefined;
});

const PSK_CCM8 = ['--priority', 'NORMAL:+PSK:+AES-128-CCM-8:-VERS-ALL:+VERS-DTLS1.2', '--pskusername', IDENTITY, '--pskkey', PSK_HEX];

describe('DTLS 1.2 PSK server ↔ gnutls-cli --udp', () => {
  it('PSK CCM_8: application data comes back echoed through the session', async () => {
    srv = await startEchoServer();
    const res = await gnutlsClient({ port: srv.port, args: PSK_CCM8, line: 'ping from gnutls' });
    expect(res.stdout).toContain('(DTLS1.2');
    expect(res.stdout).toContain('(AES-128-CCM-8)');
    expect(res.stdout).toContain('echo:ping from gnutls\n');
    expect(srv.sessions).toHaveLength(1);
    expect(srv.sessions[0].cipherSuite).toBe('TLS_PSK_WITH_AES_128_CCM_8');
    expect(srv.sessions[0].pskIdentity).toBe(IDENTITY);
    expect(srv.data).toEqual(['ping from gnutls\n']);
    expect(srv.errors).toEqual([]);
  });

  it('--resume: the second connection is an abbreviated handshake and still echoes', async () => {
    srv = await startEchoServer();
    const res = await gnutlsClient({ port: srv.port, args: ['--resume', ...PSK_CCM8], line: 'after resume' });
    expect(res.stdout).toContain('*** This is a resumed session');
    expect(res.stdout).toContain('echo:after resume\n');
    await waitFor(() => srv!.sessions.length === 2);
    expect(srv.sessions.map((s) => s.resumed)).toEqual([false, true]);
  });

  it('wrong key: no echo, handshakeError for the identity, no session', async () => {
    srv = await startEchoServer();
    const args = PSK_CCM8.map((a) => (a === PSK_HEX ? 'ffeeddccbbaa99887766554433221100' : a));
    const res = await gnutlsClient({ port: srv.port, args, timeoutMs: 5000 });
    expect(res.echoed).toBe(false);
    expect(res.stdout + res.stderr).toContain('Received alert [20]: Bad record MAC');
    await waitFor(() => srv!.errors.length > 0);
    expect(srv.errors[0].info.pskIdentity).toBe(IDENTITY);
    expect(srv.sessions).toEqual([]);
  });
});
