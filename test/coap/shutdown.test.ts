/**
 * Stopping the service: a CoAP/DTLS request in flight still gets its answer, a new one is left unanswered (its device
 * retransmits to whichever node carries its session on: docs/decisions.md), then the sessions close.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import { encodeUint } from '../../src/coap/message.ts';
import { DtlsCoapPeer, report, startCoapWorld, storedAt, type CoapWorld } from './support.ts';

let world: CoapWorld;
beforeAll(async () => {
  world = await startCoapWorld({ SHUTDOWN_GRACE_MS: '8000' });
});
afterAll(async () => {
  await closeContext(world.ctx);
});

describe('graceful close of the CoAP listener', () => {
  it('answers the request in flight, leaves new ones unanswered and unrun, then closes the DTLS sessions and the socket', async () => {
    const peer = await DtlsCoapPeer.connect(world.coapsPort, world.device.identity, Buffer.from(world.device.key));
    const r = report(10);
    const json = { name: 'Content-Format' as const, value: encodeUint(50) };
    peer.request({
      confirmable: true,
      code: 'POST',
      messageId: 1,
      token: Buffer.from('inflight'),
      options: [{ name: 'Uri-Path', value: Buffer.from('slow') }, json],
      payload: Buffer.from(r.body),
    });
    // the empty ACK: the request is in the gateway's hands, its handler slower than the piggyback window
    await peer.waitFor(1);
    expect(peer.raw[0]).toEqual(Buffer.from([0x60, 0, 0, 1]));
    const stopped = world.service.stop();
    const late = report(11);
    peer.request({
      confirmable: true,
      code: 'POST',
      messageId: 2,
      token: Buffer.from('late'),
      options: [{ name: 'Uri-Path', value: Buffer.from('report') }, json],
      payload: Buffer.from(late.body),
    });
    await peer.waitFor(2); // the separate response of the slow one
    const answer = peer.received.find((p) => p.token.toString() === 'inflight' && p.code === '2.05')!;
    expect(JSON.parse(answer.payload.toString())).toEqual({ ok: true, device: world.device.identity, m: r.m });
    peer.send(Buffer.from([0x60, 0, answer.messageId >> 8, answer.messageId & 0xff]));
    await stopped;
    expect(await storedAt(world, r.t)).toEqual([10000]);
    // the late request got no answer (no ACK, no 5.03) and was not run
    expect(peer.received.filter((p) => p.token.toString() === 'late' || (p.ack && p.messageId === 2))).toEqual([]);
    expect(await storedAt(world, late.t)).toEqual([]);
    expect(world.service.coap!.dtls.sessionCount).toBe(0);
    const before = peer.raw.length;
    peer.request({ confirmable: true, code: 'GET', messageId: 3, token: Buffer.from('after'), options: [{ name: 'Uri-Path', value: Buffer.from('hex') }] });
    await new Promise((res) => setTimeout(res, 500));
    expect(peer.raw).toHaveLength(before); // nobody listens any more
    peer.close();
  });
});
