/**
 * Handshake slots under a stall attack: hosts at other addresses that pass the cookie check, get the server's flight
 * and never answer must not keep every slot until the handshake timeout.
 */
import { describe, expect, it } from 'vitest';
import { HandshakeSlots } from '../../src/dtls/limits.ts';
import { dtlsClient, perTest, serverHelloAfterCookie, startEchoServer, waitFor } from './helpers.ts';

const t = perTest();

/** Starts a handshake from `address` that stalls after the server's flight 4: true when a ServerHello came within `ms`. */
const stalled = (port: number, address: string, ms = 5000) => serverHelloAfterCookie(t.peers, port, address, ms);

async function fill(port: number, address: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) expect(await stalled(port, address)).toBe(true);
}

describe('DTLS handshake slots', () => {
  it('stalled handshakes from three addresses holding every slot do not keep a device at a fourth address out', async () => {
    t.srv = await startEchoServer({ maxHandshakes: 30 }); // per-address limits and the 30 s handshake timeout: defaults
    for (const address of ['127.0.0.2', '127.0.0.3', '127.0.0.4']) await fill(t.srv.port, address, 10);
    expect(t.srv.server.handshakeCount).toBe(30);
    const device = await dtlsClient({ port: t.srv.port, cipher: 'PSK-AES128-CCM8:@SECLEVEL=0', line: 'still served', timeoutMs: 15_000 });
    expect(device.echoed).toBe(true);
    expect(t.srv.sessions.map((s) => s.remoteAddress)).toEqual(['127.0.0.1']);
    const held = ['127.0.0.2', '127.0.0.3', '127.0.0.4'].map((a) => t.srv!.server.sessionsFrom(a));
    expect(held.reduce((a, b) => a + b)).toBe(29); // one stalled handshake gave way
  });

  it('a new handshake from an address holding fewer takes the oldest slot of the address holding the most', async () => {
    t.srv = await startEchoServer({ maxHandshakes: 4 });
    // the destination port of every datagram the server sends, in the order it sends them
    const sentTo: number[] = [];
    const socket = t.srv.server.socket;
    const send = socket.send.bind(socket) as (...args: unknown[]) => void;
    (socket as unknown as { send: (...args: unknown[]) => void }).send = (...args: unknown[]) => {
      sentTo.push(args[1] as number);
      send(...args);
    };
    await fill(t.srv.port, '127.0.0.2', 3);
    await fill(t.srv.port, '127.0.0.3', 1);
    const [oldest, , youngerAtSameAddress] = t.peers.map((p) => p.socket.address().port);
    expect(await stalled(t.srv.port, '127.0.0.3')).toBe(true);
    const evictedAt = sentTo.length;
    expect([t.srv.server.sessionsFrom('127.0.0.2'), t.srv.server.sessionsFrom('127.0.0.3')]).toEqual([2, 2]);
    // the evicted handshake is forgotten: once a younger one's retransmission timer has sent its flight 4 again, the
    // oldest's (due earlier) would have too
    await waitFor(() => sentTo.slice(evictedAt).includes(youngerAtSameAddress), 20_000);
    expect(sentTo.slice(evictedAt)).not.toContain(oldest);
  });

  it('while every slot is taken, an address holding as many as any other gets none of theirs', async () => {
    t.srv = await startEchoServer({ maxHandshakes: 4 });
    await fill(t.srv.port, '127.0.0.2', 2);
    await fill(t.srv.port, '127.0.0.3', 2);
    expect(await stalled(t.srv.port, '127.0.0.2', 1000)).toBe(false);
    expect(await stalled(t.srv.port, '127.0.0.3', 1000)).toBe(false);
    expect([t.srv.server.sessionsFrom('127.0.0.2'), t.srv.server.sessionsFrom('127.0.0.3')]).toEqual([2, 2]);
  });
});

describe('HandshakeSlots', () => {
  it('counts by address and names the oldest of the largest holder as long as it holds more', () => {
    const slots = new HandshakeSlots<{ a: string; n: number }>((h) => h.a);
    const h = (a: string, n: number) => ({ a, n });
    const x1 = h('x', 1);
    const x2 = h('x', 2);
    const y1 = h('y', 1);
    for (const s of [x1, x2, y1]) slots.add(s);
    expect(slots.size).toBe(3);
    expect(slots.victimFor('z')).toBe(x1);
    expect(slots.victimFor('y')).toBe(x1);
    expect(slots.victimFor('x')).toBeUndefined();
    slots.delete(x1);
    slots.delete(x1);
    expect(slots.size).toBe(2);
    expect(slots.victimFor('y')).toBeUndefined();
    expect(slots.victimFor('z')).toBe(x2);
  });
});
