/**
 * Connection ID (RFC 9146) proven with test/support/cid-client, a DTLS client written from the RFCs that shares no
 * code with the server: handshake with CID, data, NAT rebinding to a new source port, data again.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { CidClient } from '../support/cid-client/client.ts';
import { IDENTITY, PSK_HEX, dtlsClient, startEchoServer, waitFor } from './helpers.ts';
import type { EchoServer } from './helpers.ts';
import type { DtlsSession } from '../../src/dtls/server.ts';
import { parseServerHello } from '../../src/tls/messages.ts';
import { RawPeer, clientHello, clientHelloDatagram } from './raw-client.ts';

let srv: EchoServer | undefined;
const clients: CidClient[] = [];
const peers: RawPeer[] = [];
afterEach(async () => {
  await srv?.server.close();
  srv = undefined;
  for (const c of clients.splice(0)) c.close();
  for (const p of peers.splice(0)) p.close();
});

async function connected(port: number, suite: 'ccm8' | 'cbc' = 'ccm8'): Promise<CidClient> {
  const c = new CidClient(port, { identity: IDENTITY, psk: Buffer.from(PSK_HEX, 'hex'), suite });
  clients.push(c);
  await c.connect();
  return c;
}

describe('DTLS Connection ID (RFC 9146) with an independent client', () => {
  it.each([
    ['ccm8', 'TLS_PSK_WITH_AES_128_CCM_8'],
    ['cbc', 'TLS_PSK_WITH_AES_128_CBC_SHA256'],
  ] as const)('%s: issues a CID, follows the client to a new source port, answers there, and keeps one session', async (suite, suiteName) => {
    srv = await startEchoServer();
    const c = await connected(srv.port, suite);
    await waitFor(() => srv!.sessions.length === 1);
    const session = srv.sessions[0];
    expect(session.cipherSuite).toBe(suiteName);
    expect(session.connectionId).toHaveLength(8);
    expect(c.serverCid).toEqual(session.connectionId);
    expect(session.peerConnectionId).toEqual(c.clientCid);

    c.send('before');
    const first = await c.waitForData((s) => s === 'echo:before');
    expect(first.localPort).toBe(c.localPort);
    const oldPort = c.localPort;

    const moves: Array<{ address: string; port: number }> = [];
    session.on('migrate', (from: { address: string; port: number }) => moves.push(from));
    await c.rebind();
    expect(c.localPort).not.toBe(oldPort);
    c.send('after', 3); // with padding inside the DTLSInnerPlaintext
    const second = await c.waitForData((s) => s === 'echo:after');
    expect(second.localPort).toBe(c.localPort); // the answer went to the new port
    expect(session.remotePort).toBe(c.localPort);
    expect(moves).toEqual([{ address: '127.0.0.1', port: oldPort }]);
    expect(srv.server.sessionCount).toBe(1);
    expect(srv.server.sessionsFrom('127.0.0.1')).toBe(1);
    expect(srv.sessions).toHaveLength(1);
    expect(srv.data).toEqual(['before', 'after']);
  });

  // "nothing happened" proven by what happens next: one server socket reads datagrams in the order loopback delivered
  // them, so once a genuine record sent after the bad one is answered, the bad one was handled; the session's moves
  // then show whether it moved: home → the genuine record's port directly, never through the bad record's port
  async function movesAfter(c: CidClient, session: DtlsSession, bad: Buffer, marker: string): Promise<Array<{ port: number }>> {
    const moves: Array<{ port: number }> = [];
    session.on('migrate', (from: { port: number }) => moves.push({ port: from.port }));
    await c.rebind();
    c.sendRaw(bad);
    await c.rebind();
    c.send(marker);
    await c.waitForData((s) => s === `echo:${marker}`);
    expect(session.remotePort).toBe(c.localPort);
    return moves;
  }

  it('a replayed (older) record from another port is dropped and does not move the session', async () => {
    srv = await startEchoServer();
    const c = await connected(srv.port);
    await waitFor(() => srv!.sessions.length === 1);
    const session: DtlsSession = srv.sessions[0];
    c.send('one');
    await c.waitForData((s) => s === 'echo:one');
    const homePort = c.localPort;
    const replay = c.sealApplicationData('one', 1); // epoch 1 seq 1 was "one" (seq 0 was the Finished)
    expect(await movesAfter(c, session, replay, 'two')).toEqual([{ port: homePort }]);
    expect(srv.data).toEqual(['one', 'two']);
  });

  it('a forged record carrying the session CID from another port is dropped and moves nothing', async () => {
    srv = await startEchoServer();
    const c = await connected(srv.port);
    await waitFor(() => srv!.sessions.length === 1);
    const homePort = c.localPort;
    const forged = c.sealApplicationData('forged', 50);
    forged[forged.length - 1] ^= 1; // break the CCM tag
    expect(await movesAfter(c, srv.sessions[0], forged, 'genuine')).toEqual([{ port: homePort }]);
    expect(srv.data).toEqual(['genuine']);
  });

  it('openssl, which does not offer connection_id, gets no CID and still works alongside', async () => {
    srv = await startEchoServer();
    const res = await dtlsClient({ port: srv.port, cipher: 'PSK-AES128-CCM8:@SECLEVEL=0' });
    expect(res.echoed).toBe(true);
    expect(srv.sessions[0].connectionId).toBeUndefined();
  });

  it.each([
    ['TLS_PSK_WITH_AES_128_GCM_SHA256', 0x00a8, true],
    ['TLS_PSK_WITH_AES_128_CCM_8', 0xc0a8, true],
    ['TLS_PSK_WITH_AES_128_CBC_SHA256', 0x00ae, true],
    ['TLS_PSK_WITH_AES_128_CBC_SHA256 without the extension', 0x00ae, false],
  ])('%s: an 8-byte CID in the ServerHello: %s', async (name, suite, issued) => {
    srv = await startEchoServer();
    const p = await new RawPeer(srv.port).open();
    peers.push(p);
    const exts = [{ type: 23, data: Buffer.alloc(0) }, ...(name.includes('without') ? [] : [{ type: 54, data: Buffer.from('00', 'hex') }])];
    const ch = { ...clientHello(), cipherSuites: [suite], extensions: exts };
    p.send(clientHelloDatagram(ch, 0, 0));
    await waitFor(() => p.received.length > 0);
    const cookie = p.received.shift()!.fragments[0].body.subarray(3);
    p.send(clientHelloDatagram({ ...ch, cookie }, 1, 1));
    const got = await p.take((d) => d.fragments.some((f) => f.type === 2));
    const sh = parseServerHello(got.fragments.find((f) => f.type === 2)!.body);
    const ext = sh.extensions.find((e) => e.type === 54);
    expect(ext !== undefined).toBe(issued);
    if (ext) expect(ext.data[0]).toBe(8);
  });
});

describe('the CID test client stays independent of the server', () => {
  it('imports only node built-ins and its own files (no src/, no test helper that reaches src/)', async () => {
    const dir = fileURLToPath(new URL('../support/cid-client/', import.meta.url));
    const files = (await readdir(dir)).filter((f) => f.endsWith('.ts'));
    expect(files.sort()).toEqual(['client.ts', 'crypto.ts']);
    for (const file of files) {
      const text = await readFile(join(dir, file), 'utf8');
      const specifiers = [...text.matchAll(/\bfrom\s+'([^']+)'|\bimport\s*\(\s*'([^']+)'\s*\)|^import\s+'([^']+)'/gm)].map((m) => m[1] ?? m[2] ?? m[3]);
      expect(specifiers.length).toBeGreaterThan(0);
      for (const spec of specifiers) expect(spec, `${file} imports ${spec}`).toMatch(/^(node:[a-z_/]+|\.\/[a-z-]+\.ts)$/);
    }
  });
});
