/**
 * What an established DTLS session keeps: a server holds hundreds of thousands of idle sessions, so everything only
 * the handshake needs (transcript, master secret, key block, ECDHE key, flight timers, records queued during the PSK
 * lookup) lives in one HandshakeState that the session lets go once it is established. Counted on the live heap.
 */
import { queryObjects } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { HandshakeState } from '../../src/dtls/handshake-state.ts';
import { CidClient } from '../support/cid-client/client.ts';
import { until } from '../support/until.ts';
import { IDENTITY, perTest, PSK_HEX, startEchoServer } from './helpers.ts';
import { HandClient, RawPeer } from './raw-client.ts';

const started = perTest();
const { peers, cidClients } = started;

/** Live HandshakeState objects (queryObjects collects garbage first). */
const handshakesHeld = () => queryObjects(HandshakeState, { format: 'count' });

describe('an established idle session', () => {
  it('holds no handshake state: the transcript, secrets and timers go when the handshake ends', async () => {
    const srv = (started.srv = await startEchoServer());
    const held = handshakesHeld();
    const clients: HandClient[] = [];
    for (let i = 0; i < 3; i++) {
      const p = await new RawPeer(srv.port).open();
      peers.push(p);
      const h = new HandClient(p);
      await h.hello(); // flight 4 is out: the server is waiting for the ClientKeyExchange
      clients.push(h);
    }
    expect(handshakesHeld()).toBe(held + 3);
    for (const [i, h] of clients.entries()) {
      peers[i].send(Buffer.concat(h.flight5()));
      await until(
        async () => srv.sessions.length,
        (n) => n > i,
        'the session established',
      );
    }
    expect(handshakesHeld()).toBe(held);
    // and what it kept is enough to carry on
    expect(await clients[0].exchange('after')).toBe('echo:after');
    expect(srv.sessions.every((s) => s.established)).toBe(true);
  });

  it('with a Connection ID, holds no handshake state either, and still answers', async () => {
    const srv = (started.srv = await startEchoServer());
    const held = handshakesHeld();
    const c = new CidClient(srv.port, { identity: IDENTITY, psk: Buffer.from(PSK_HEX, 'hex') });
    cidClients.push(c);
    await c.connect();
    await until(
      async () => srv.sessions.length,
      (n) => n === 1,
      'the CID session',
    );
    expect(handshakesHeld()).toBe(held);
    expect(srv.sessions[0].connectionId).toBeDefined();
  });
});
