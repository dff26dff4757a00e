/** The server's first flights seen from a hand-driven peer: cookie exchange, retransmission, limits, timeouts. */
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { parseHandshakeFragments, transcriptBytes } from '../../src/dtls/handshake.ts';
import { RecordLayer } from '../../src/dtls/record.ts';
import { encodeClientHello, encodeClientKeyExchangePsk, parseServerHello } from '../../src/tls/messages.ts';
import { extendedMasterSecret, keyExpansion, pskPreMasterSecret, splitKeyBlock, verifyData } from '../../src/tls/prf.ts';
import { cipherSuiteById, keyBlockLength } from '../../src/tls/suites/index.ts';
import { RawPeer, clientHello, clientHelloDatagram } from './raw-client.ts';
import type { Received } from './raw-client.ts';
import { IDENTITY, PSK_HEX, perTest, startEchoServer, waitFor } from './helpers.ts';

const t = perTest();

async function peer(port: number): Promise<RawPeer> {
  const p = await new RawPeer(port).open();
  t.peers.push(p);
  return p;
}

/** Sends ClientHello 1, reads the cookie from the HelloVerifyRequest, returns ClientHello 2 ready to send. */
async function cookieExchange(p: RawPeer): Promise<{ hvrSize: number; ch1Size: number; ch2: Buffer }> {
  const ch = clientHello();
  const ch1 = clientHelloDatagram(ch, 0, 0);
  p.send(ch1);
  await waitFor(() => p.received.length > 0);
  const hvr = p.received.shift()!;
  expect(hvr.fragments[0].type).toBe(3); // hello_verify_request
  const cookie = hvr.fragments[0].body.subarray(3);
  return { hvrSize: hvr.datagram.length, ch1Size: ch1.length, ch2: clientHelloDatagram({ ...ch, cookie }, 1, 1) };
}

describe('DTLS cookie exchange and flights', () => {
  it('answers a ClientHello without cookie with a HelloVerifyRequest no larger than it, keeping no state', async () => {
    t.srv = await startEchoServer();
    const p = await peer(t.srv.port);
    const { hvrSize, ch1Size } = await cookieExchange(p);
    expect(hvrSize).toBeLessThanOrEqual(ch1Size);
    expect(t.srv.server.handshakeCount).toBe(0);
  });

  it('a cookie made for another port is answered with a new HelloVerifyRequest, not a ServerHello', async () => {
    t.srv = await startEchoServer();
    const { ch2 } = await cookieExchange(await peer(t.srv.port));
    const other = await peer(t.srv.port);
    other.send(ch2);
    await waitFor(() => other.received.length > 0);
    expect(other.received[0].fragments[0].type).toBe(3);
    expect(t.srv.server.handshakeCount).toBe(0);
  });

  it('sends ServerHello + ServerHelloDone after a valid cookie, retransmits them on its timer and when the client repeats ClientHello', async () => {
    t.srv = await startEchoServer();
    const p = await peer(t.srv.port);
    const { ch2 } = await cookieExchange(p);
    p.send(ch2);
    await waitFor(() => p.received.length > 0);
    const first = p.received.shift()!;
    expect(first.fragments.map((f) => [f.type, f.messageSeq])).toEqual([
      [2, 1],
      [14, 2],
    ]);
    expect(t.srv.server.handshakeCount).toBe(1);
    // Timer: nothing from the client for ~1 s → the same flight again, with new record sequence numbers.
    await waitFor(() => p.received.length > 0, 3000);
    const again = p.received.shift()!;
    expect(again.fragments.map((f) => [f.type, f.messageSeq])).toEqual([
      [2, 1],
      [14, 2],
    ]);
    expect(again.records[0].seq).toBeGreaterThan(first.records[first.records.length - 1].seq);
    // The client retransmitting its ClientHello gets the flight at once.
    p.send(ch2);
    await waitFor(() => p.received.length > 0, 1500); // the timer's next turn is 2 s away
    expect(parseHandshakeFragments(p.received[0].records[0].fragment)[0].type).toBe(2);
  });

  it('abandons a handshake after handshakeTimeoutMs with a handshakeError', async () => {
    t.srv = await startEchoServer({ handshakeTimeoutMs: 300 });
    const p = await peer(t.srv.port);
    const { ch2 } = await cookieExchange(p);
    p.send(ch2);
    await waitFor(() => t.srv!.errors.length > 0);
    expect(t.srv.errors[0].err.message).toMatch(/timeout/);
    expect(t.srv.server.handshakeCount).toBe(0);
  });

  it('maxHandshakes: a second client with a valid cookie gets no ServerHello while the first handshake runs', async () => {
    t.srv = await startEchoServer({ maxHandshakes: 1 });
    const a = await peer(t.srv.port);
    const b = await peer(t.srv.port);
    const ea = await cookieExchange(a);
    const eb = await cookieExchange(b);
    a.send(ea.ch2);
    await waitFor(() => a.received.length > 0);
    b.send(eb.ch2);
    await new Promise((r) => setTimeout(r, 200));
    expect(b.received).toEqual([]);
    expect(t.srv.server.handshakeCount).toBe(1);
  });
});

describe('a complete handshake by a hand-driven peer built from the RFC primitives', () => {
  it('the server answers a repeated flight 5 with flight 6 again, and the session then carries data', async () => {
    t.srv = await startEchoServer();
    const p = await peer(t.srv.port);
    const psk = Buffer.from(PSK_HEX, 'hex');
    const ch = clientHello();
    p.send(clientHelloDatagram(ch, 0, 0));
    await waitFor(() => p.received.length > 0);
    const cookie = p.received.shift()!.fragments[0].body.subarray(3);
    const ch2 = { ...ch, cookie };
    p.send(clientHelloDatagram(ch2, 1, 1));
    await waitFor(() => p.received.length > 0);
    const [shFrag, shdFrag] = p.received.shift()!.fragments;
    const sh = parseServerHello(shFrag.body);
    expect(sh.cipherSuite).toBe(0x00a8);
    const suite = cipherSuiteById(sh.cipherSuite)!;

    const transcript = createHash('sha256');
    const ch2Body = encodeClientHello(ch2, { dtls: true });
    transcript.update(transcriptBytes({ type: 1, messageSeq: 1, body: ch2Body }));
    transcript.update(transcriptBytes({ type: shFrag.type, messageSeq: shFrag.messageSeq, body: shFrag.body }));
    transcript.update(transcriptBytes({ type: shdFrag.type, messageSeq: shdFrag.messageSeq, body: shdFrag.body }));
    const cke = { type: 16, messageSeq: 2, body: encodeClientKeyExchangePsk(Buffer.from(IDENTITY)) };
    transcript.update(transcriptBytes(cke));
    const master = extendedMasterSecret(pskPreMasterSecret(psk), transcript.copy().digest());
    const k = splitKeyBlock(keyExpansion(master, sh.random, ch.random, keyBlockLength(suite)), 0, 16, 4);
    const fin = { type: 20, messageSeq: 3, body: verifyData(master, 'client', transcript.copy().digest()) };
    transcript.update(transcriptBytes(fin));
    const expectedServerFinished = verifyData(master, 'server', transcript.digest());

    const rl = new RecordLayer();
    rl.setInitialWriteSequence(2);
    rl.installWriteEpoch(1, suite.createProtection(k.clientMacKey, k.clientKey, k.clientIv));
    rl.installReadEpoch(1, suite.createProtection(k.serverMacKey, k.serverKey, k.serverIv));
    const flight5 = (): Buffer => Buffer.concat([rl.seal(0, 22, transcriptBytes(cke)), rl.seal(0, 20, Buffer.from([1])), rl.seal(1, 22, transcriptBytes(fin))]);
    const serverFinished = (d: Received): Buffer | undefined => {
      const rec = d.records.find((r) => r.epoch === 1 && r.type === 22);
      const plain = rec && rl.open(rec);
      return Buffer.isBuffer(plain) ? parseHandshakeFragments(plain)[0].body : undefined;
    };

    const epoch1 = (d: Received): boolean => d.records.some((r) => r.epoch === 1);
    p.send(flight5());
    const f6 = await p.take(epoch1); // (a timer retransmission of flight 4 may come first on a slow machine)
    expect(f6.records.map((r) => [r.type, r.epoch])).toEqual([
      [20, 0],
      [22, 1],
    ]);
    expect(serverFinished(f6)).toEqual(expectedServerFinished);
    await waitFor(() => t.srv!.sessions.length === 1);

    // Our flight 5 "was not acknowledged": repeat it, the server repeats flight 6 (fresh record numbers).
    p.send(flight5());
    expect(serverFinished(await p.take(epoch1))).toEqual(expectedServerFinished);

    p.send(rl.seal(1, 23, Buffer.from('by hand')));
    const echo = rl.open((await p.take((d) => d.records.some((r) => r.type === 23))).records[0]);
    expect(echo).toEqual(Buffer.from('echo:by hand'));
    expect(t.srv.sessions).toHaveLength(1);
  });
});
