/** The server's first flights seen from a hand-driven peer: cookie exchange, retransmission, limits, timeouts. */
import { afterEach, describe, expect, it } from 'vitest';
import { parseHandshakeFragments } from '../../src/dtls/handshake.ts';
import { RawPeer, clientHello, clientHelloDatagram } from './raw-client.ts';
import { startEchoServer, waitFor } from './helpers.ts';
import type { EchoServer } from './helpers.ts';

let srv: EchoServer | undefined;
const peers: RawPeer[] = [];
afterEach(async () => {
  await srv?.server.close();
  srv = undefined;
  for (const p of peers.splice(0)) p.close();
});

async function peer(port: number): Promise<RawPeer> {
  const p = await new RawPeer(port).open();
  peers.push(p);
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
    srv = await startEchoServer();
    const p = await peer(srv.port);
    const { hvrSize, ch1Size } = await cookieExchange(p);
    expect(hvrSize).toBeLessThanOrEqual(ch1Size);
    expect(srv.server.handshakeCount).toBe(0);
  });

  it('a cookie made for another port is answered with a new HelloVerifyRequest, not a ServerHello', async () => {
    srv = await startEchoServer();
    const { ch2 } = await cookieExchange(await peer(srv.port));
    const other = await peer(srv.port);
    other.send(ch2);
    await waitFor(() => other.received.length > 0);
    expect(other.received[0].fragments[0].type).toBe(3);
    expect(srv.server.handshakeCount).toBe(0);
  });

  it('sends ServerHello + ServerHelloDone after a valid cookie, retransmits them on its timer and when the client repeats ClientHello', async () => {
    srv = await startEchoServer();
    const p = await peer(srv.port);
    const { ch2 } = await cookieExchange(p);
    p.send(ch2);
    await waitFor(() => p.received.length > 0);
    const first = p.received.shift()!;
    expect(first.fragments.map((f) => [f.type, f.messageSeq])).toEqual([
      [2, 1],
      [14, 2],
    ]);
    expect(srv.server.handshakeCount).toBe(1);
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
    srv = await startEchoServer({ handshakeTimeoutMs: 300 });
    const p = await peer(srv.port);
    const { ch2 } = await cookieExchange(p);
    p.send(ch2);
    await waitFor(() => srv!.errors.length > 0);
    expect(srv.errors[0].err.message).toMatch(/timeout/);
    expect(srv.server.handshakeCount).toBe(0);
  });

  it('maxHandshakes: a second client with a valid cookie gets no ServerHello while the first handshake runs', async () => {
    srv = await startEchoServer({ maxHandshakes: 1 });
    const a = await peer(srv.port);
    const b = await peer(srv.port);
    const ea = await cookieExchange(a);
    const eb = await cookieExchange(b);
    a.send(ea.ch2);
    await waitFor(() => a.received.length > 0);
    b.send(eb.ch2);
    await new Promise((r) => setTimeout(r, 200));
    expect(b.received).toEqual([]);
    expect(srv.server.handshakeCount).toBe(1);
  });
});
