/** The DTLS server against openssl s_client -dtls1_2: every PSK suite echoes, bad credentials fail fast. */
import { afterEach, describe, expect, it } from 'vitest';
import { dtlsClient, startEchoServer, waitFor, IDENTITY } from './helpers.ts';
import type { EchoServer } from './helpers.ts';
import { parseDatagram } from '../../src/dtls/record.ts';

let srv: EchoServer | undefined;
afterEach(async () => {
  await srv?.server.close();
  srv = undefined;
});

describe('DTLS 1.2 PSK server ↔ openssl s_client -dtls1_2', () => {
  it.each([
    ['PSK-AES128-CCM8:@SECLEVEL=0', 'TLS_PSK_WITH_AES_128_CCM_8'],
    ['PSK-AES128-GCM-SHA256', 'TLS_PSK_WITH_AES_128_GCM_SHA256'],
    ['PSK-AES128-CBC-SHA256', 'TLS_PSK_WITH_AES_128_CBC_SHA256'],
  ])('%s: application data comes back echoed', async (cipher, suiteName) => {
    srv = await startEchoServer();
    const res = await dtlsClient({ port: srv.port, cipher, line: `ping ${suiteName}`, extraArgs: ['-mtu', '1200'] });
    expect(res.stdout).toContain(`echo:ping ${suiteName}\n`);
    expect(srv.sessions).toHaveLength(1);
    expect(srv.sessions[0].pskIdentity).toBe(IDENTITY);
    expect(srv.sessions[0].cipherSuite).toBe(suiteName);
    expect(srv.sessions[0].extendedMasterSecret).toBe(true); // openssl 3 offers EMS
    expect(srv.errors).toEqual([]);
  });

  it('the server prefers CCM_8 when the client offers all three suites', async () => {
    srv = await startEchoServer();
    const res = await dtlsClient({
      port: srv.port,
      cipher: 'PSK-AES128-CBC-SHA256:PSK-AES128-GCM-SHA256:PSK-AES128-CCM8:@SECLEVEL=0',
    });
    expect(res.echoed).toBe(true);
    expect(srv.sessions[0].cipherSuite).toBe('TLS_PSK_WITH_AES_128_CCM_8');
  });

  it('unknown identity: openssl gets bad_record_mac as for a wrong key, handshakeError emitted, no session', async () => {
    srv = await startEchoServer();
    const res = await dtlsClient({ port: srv.port, cipher: 'PSK-AES128-GCM-SHA256', identity: 'nobody' });
    expect(res.echoed).toBe(false);
    expect(res.stderr).toContain('bad record mac');
    await waitFor(() => srv!.errors.length > 0);
    expect(srv.errors[0].info).toMatchObject({ remoteAddress: '127.0.0.1', pskIdentity: 'nobody' });
    expect(srv.sessions).toEqual([]);
  });

  it('wrong key: the client Finished fails authentication, openssl gets bad_record_mac, no session', async () => {
    srv = await startEchoServer();
    const res = await dtlsClient({ port: srv.port, cipher: 'PSK-AES128-CCM8:@SECLEVEL=0', pskHex: 'ffeeddccbbaa99887766554433221100' });
    expect(res.echoed).toBe(false);
    expect(res.stderr).toContain('bad record mac');
    await waitFor(() => srv!.errors.length > 0);
    expect(srv.errors[0].info).toMatchObject({ remoteAddress: '127.0.0.1', pskIdentity: IDENTITY });
    expect(srv.sessions).toEqual([]);
  });

  it('server MTU 64: ServerHello is sent in fragments, no datagram exceeds 64 bytes, openssl completes', async () => {
    srv = await startEchoServer({ mtu: 64 });
    const res = await dtlsClient({ port: srv.port, cipher: 'PSK-AES128-GCM-SHA256', line: 'x' });
    expect(res.stdout).toContain('echo:x\n');
    const handshakeDatagrams = srv.sent.filter((d) => parseDatagram(d).some((r) => r.type === 22));
    expect(Math.max(...handshakeDatagrams.map((d) => d.length))).toBeLessThanOrEqual(64);
    // fragment_offset > 0 in some plaintext handshake record: the ServerHello really was split
    const fragmented = srv.sent.flatMap(parseDatagram).some((r) => r.type === 22 && r.epoch === 0 && r.fragment.readUIntBE(6, 3) > 0);
    expect(fragmented).toBe(true);
  });

  it('client MTU 300 (openssl -mtu 300) still completes', async () => {
    srv = await startEchoServer();
    const res = await dtlsClient({ port: srv.port, cipher: 'PSK-AES128-CCM8:@SECLEVEL=0', extraArgs: ['-mtu', '300'] });
    expect(res.echoed).toBe(true);
  });

  it('close_notify from openssl ends the session', async () => {
    srv = await startEchoServer();
    let closed = false;
    srv.server.on('session', (s) => s.on('close', () => (closed = true)));
    const res = await dtlsClient({ port: srv.port, cipher: 'PSK-AES128-GCM-SHA256', closeNotify: true });
    expect(res.echoed).toBe(true);
    await waitFor(() => closed);
    expect(srv.server.sessionCount).toBe(0);
  });

  it('an idle session expires after idleTimeoutMs and emits close', async () => {
    srv = await startEchoServer({ idleTimeoutMs: 1500 });
    let closed = false;
    srv.server.on('session', (s) => s.on('close', () => (closed = true)));
    const res = await dtlsClient({ port: srv.port, cipher: 'PSK-AES128-CCM8:@SECLEVEL=0' });
    expect(res.echoed).toBe(true);
    // openssl was killed without close_notify: only the idle timer can end the session
    await waitFor(() => closed, 6000);
    expect(srv.server.sessionCount).toBe(0);
  });

  it('maxSessions: with one session open, a second client does not get a session', async () => {
    srv = await startEchoServer({ maxSessions: 1 });
    const first = await dtlsClient({ port: srv.port, cipher: 'PSK-AES128-GCM-SHA256', line: 'first' });
    expect(first.echoed).toBe(true); // killed without close_notify: the session stays until idle expiry
    const second = await dtlsClient({ port: srv.port, cipher: 'PSK-AES128-GCM-SHA256', line: 'second', timeoutMs: 2500 });
    expect(second.stdout).not.toContain('echo:second');
    expect(srv.sessions).toHaveLength(1);
  });
});
