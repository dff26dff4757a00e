/**
 * What records that prove nothing cannot do to a DTLS session: a replayed ClientHello, a Connection ID record sent
 * from someone else's address, plaintext alerts, records that fail authentication and plaintext handshake fragments
 * after the handshake. Driven by hand (test/dtls/raw-client.ts) and by the independent CID client.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeFragment } from '../../src/dtls/handshake.ts';
import { DTLS12, encodeRecord } from '../../src/dtls/record.ts';
import { encodeClientHello } from '../../src/tls/messages.ts';
import { CidClient } from '../support/cid-client/client.ts';
import { until } from '../support/until.ts';
import { IDENTITY, PSK_HEX, startEchoServer } from './helpers.ts';
import type { EchoServer } from './helpers.ts';
import { HandClient, RawPeer, clientHello } from './raw-client.ts';

let srv: EchoServer | undefined;
const peers: RawPeer[] = [];
const cidClients: CidClient[] = [];
afterEach(async () => {
  await srv?.server.close();
  srv = undefined;
  for (const p of peers.splice(0)) p.close();
  for (const c of cidClients.splice(0)) c.close();
});

async function peer(port: number, address = '127.0.0.1'): Promise<RawPeer> {
  const p = await new RawPeer(port).open(address);
  peers.push(p);
  return p;
}

/** A full PSK handshake by hand from `p`; resolves once the server holds the session. */
async function connected(p: RawPeer): Promise<HandClient> {
  const h = new HandClient(p);
  await h.hello();
  const before = srv!.sessions.length;
  p.send(Buffer.concat(h.flight5()));
  await until(
    async () => srv!.sessions.length,
    (n) => n > before,
    'the hand-driven session',
  );
  return h;
}

async function cidConnected(port: number): Promise<CidClient> {
  const c = new CidClient(port, { identity: IDENTITY, psk: Buffer.from(PSK_HEX, 'hex') });
  cidClients.push(c);
  await c.connect();
  return c;
}

describe('a replayed ClientHello with a valid cookie (RFC 6347 §4.2.8)', () => {
  it('leaves the established session working while the new handshake proves nothing', async () => {
    srv = await startEchoServer();
    const p = await peer(srv.port);
    const h = await connected(p);
    const session = srv.sessions[0];
    expect(await h.exchange('before')).toBe('echo:before');

    p.send(h.ch2Datagram); // the cookie is still valid: the server starts a handshake
    await p.take((d) => d.fragments.some((f) => f.type === 2));
    expect(session.established).toBe(true);
    expect(await h.exchange('after the replay')).toBe('echo:after the replay');
    expect(srv.server.sessionCount).toBe(1);
  });

  it('a new handshake that completes from the same address and port replaces the old session', async () => {
    srv = await startEchoServer();
    const p = await peer(srv.port);
    const old = await connected(p);
    const first = srv.sessions[0];
    const restarted = new HandClient(p);
    await restarted.hello();
    expect(await old.exchange('old keys, mid-handshake')).toBe('echo:old keys, mid-handshake');
    p.send(Buffer.concat(restarted.flight5()));
    await until(
      async () => srv!.sessions.length,
      (n) => n === 2,
      'the second session',
    );
    await until(
      async () => first.closed,
      (c) => c,
      'the first session closed',
    );
    expect(await restarted.exchange('new keys')).toBe('echo:new keys');
    expect(srv.server.sessionCount).toBe(1);
    expect(srv.server.sessionsFrom('127.0.0.1')).toBe(1);
  });
});

describe('Connection ID migration (RFC 9146 §6) into an address someone else uses', () => {
  it("an authentic CID record sent from another session's address and port does not end that session", async () => {
    srv = await startEchoServer();
    const victimPeer = await peer(srv.port, '127.0.0.2');
    const victim = await connected(victimPeer);
    const victimSession = srv.sessions[0];
    const mover = await cidConnected(srv.port);
    await until(
      async () => srv!.sessions.length,
      (n) => n === 2,
      'the CID session',
    );

    // The CID device puts its own authentic record on a datagram that claims the victim's address and port.
    victimPeer.socket.send(mover.sealApplicationData('from your address', 7), srv.port, '127.0.0.1');
    await until(
      async () => srv!.data,
      (d) => d.includes('from your address'),
      'the moved record handled',
    );
    expect(victimSession.established).toBe(true);
    expect(await victim.exchange('still mine')).toBe('echo:still mine');
    mover.sendRaw(mover.sealApplicationData('back home', 8)); // newer than the moved record: the session follows
    await mover.waitForData((d) => d === 'echo:back home');
    expect(srv.server.sessionCount).toBe(2);
  });

  it('a session does not move into an address that is at its per-address cap', async () => {
    srv = await startEchoServer({ maxSessionsPerAddress: 1 });
    const resident = await peer(srv.port, '127.0.0.2');
    await connected(resident);
    const mover = await cidConnected(srv.port);
    await until(
      async () => srv!.sessions.length,
      (n) => n === 2,
      'the CID session',
    );
    const moverSession = srv.sessions[1];
    const home = moverSession.remotePort;

    const elsewhere = await peer(srv.port, '127.0.0.2');
    elsewhere.socket.send(mover.sealApplicationData('over the cap', 7), srv.port, '127.0.0.1');
    await until(
      async () => srv!.data,
      (d) => d.includes('over the cap'),
      'the record handled',
    );
    expect(srv.server.sessionsFrom('127.0.0.2')).toBe(1);
    expect(moverSession.remoteAddress).toBe('127.0.0.1');
    expect(moverSession.remotePort).toBe(home);
  });
});

describe('records that fail or lack authentication during a handshake (RFC 6347 §4.1.2.7)', () => {
  it('a forged plaintext fatal alert during a resumption neither ends it nor drops the cached session', async () => {
    srv = await startEchoServer();
    const full = await connected(await peer(srv.port));
    const p = await peer(srv.port);
    const resume = new HandClient(p, { sessionId: full.sessionId });
    await resume.hello();
    expect(resume.resumedByServer).toBe(true);

    // Anyone who can put the device's address on a datagram can send this; nothing in it is authenticated.
    p.send(encodeRecord({ type: 21, version: DTLS12, epoch: 0, seq: 40, fragment: Buffer.from([2, 40]) }));
    p.send(Buffer.concat(resume.resumeFlight(full.master)));
    await until(
      async () => srv!.sessions.length,
      (n) => n === 2,
      'the resumed session',
    );
    expect(srv.sessions[1].resumed).toBe(true);
    expect(await resume.exchange('resumed')).toBe('echo:resumed');
    expect(srv.errors).toEqual([]);
  });

  it('a garbage epoch-1 record before the client Finished is dropped; the Finished completes the handshake', async () => {
    srv = await startEchoServer();
    const p = await peer(srv.port);
    const h = new HandClient(p);
    await h.hello();
    const [cke, ccs, finished] = h.flight5();
    const garbage = encodeRecord({ type: 22, version: DTLS12, epoch: 1, seq: 9, fragment: randomBytes(48) });
    p.send(Buffer.concat([cke, ccs, garbage, finished]));
    await until(
      async () => srv!.sessions.length,
      (n) => n === 1,
      'the session',
    );
    expect(await h.exchange('despite garbage')).toBe('echo:despite garbage');
    expect(srv.errors).toEqual([]);
  });
});

describe('handshake messages after the handshake', () => {
  it('a renegotiating ClientHello in epoch 1 gets a no_renegotiation warning and the session keeps working', async () => {
    srv = await startEchoServer();
    const p = await peer(srv.port);
    const h = await connected(p);
    const body = encodeClientHello(clientHello(), { dtls: true });
    p.send(h.records.seal(1, 22, encodeFragment(1, 4, body.length, 0, body)));
    const got = await p.take((d) => d.records.some((r) => r.type === 21 && r.epoch === 1));
    expect(h.records.open(got.records.find((r) => r.type === 21)!)).toEqual(Buffer.from([1, 100]));
    expect(await h.exchange('still on')).toBe('echo:still on');
  });

  it('plaintext fragments do not keep an idle session alive', async () => {
    srv = await startEchoServer({ idleTimeoutMs: 1000 });
    const p = await peer(srv.port);
    await connected(p);
    const session = srv.sessions[0];
    // Four fragments announcing 16 KiB messages at the next message_seq values, sent again and again.
    let seq = 100;
    const forge = setInterval(() => {
      for (let ms = 4; ms < 8; ms++) {
        p.send(encodeRecord({ type: 22, version: DTLS12, epoch: 0, seq: seq++, fragment: encodeFragment(16, ms, 16384, 0, Buffer.alloc(0)) }));
      }
    }, 100);
    try {
      await until(
        async () => session.closed,
        (c) => c,
        'the idle session closed',
        15_000,
      );
    } finally {
      clearInterval(forge);
    }
  });
});
