/** A handler slower than GATEWAY_WAIT_MS: the device gets 2.04 "accepted" (HTTPS says 202) and the job still runs. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeUint } from '../../src/coap/message.ts';
import { DtlsCoapPeer, report, runsLogging, startCoapWorld, storedAt, type CoapWorld } from './support.ts';

let world: CoapWorld;
beforeAll(async () => {
  world = await startCoapWorld({ GATEWAY_WAIT_MS: '200', COAP_PIGGYBACK_MS: '1000' });
});
afterAll(async () => {
  await world?.close();
});

describe('no answer from the handler within GATEWAY_WAIT_MS', () => {
  it('answers 2.04 with the accepted body, and the queued job is still processed and stored', async () => {
    const peer = await DtlsCoapPeer.connect(world.coapsPort, world.device.identity, Buffer.from(world.device.key));
    try {
      const r = report(14);
      peer.request({
        confirmable: true,
        code: 'POST',
        messageId: 1,
        token: Buffer.from('q'),
        options: [
          { name: 'Uri-Path', value: Buffer.from('slow') },
          { name: 'Content-Format', value: encodeUint(50) },
        ],
        payload: Buffer.from(r.body),
      });
      const [res] = await peer.waitFor(1);
      expect(res).toMatchObject({ ack: true, code: '2.04', messageId: 1 });
      expect(JSON.parse(res.payload.toString())).toEqual({ status: 'accepted', message: 'queued; no answer from the handler in time' });
      const deadline = Date.now() + 10_000;
      while ((await storedAt(world, r.t)).length === 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
      expect(await storedAt(world, r.t)).toEqual([14000]);
      expect(await runsLogging(world.api, `m=${r.m}`)).toHaveLength(1);
    } finally {
      peer.close();
    }
  });
});
