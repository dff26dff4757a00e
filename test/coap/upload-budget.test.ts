/** The upload budget of the coaps listener over real DTLS sessions: one device's many sessions do not crowd out the others. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeBlock } from '../../src/coap/block.ts';
import { encodeUint } from '../../src/coap/message.ts';
import { DtlsCoapPeer, report, startCoapWorld, type CoapWorld } from './support.ts';

let world: CoapWorld;
// 1024-byte bodies: the listener's budget is 64 of them, one block of 1024 holds a whole body's share
beforeAll(async () => {
  world = await startCoapWorld({ DEVICE_BODY_LIMIT_BYTES: '1024' });
});
afterAll(async () => {
  await world?.close();
});

const firstBlock = (path: string, messageId: number) => ({
  confirmable: true,
  code: 'POST' as const,
  messageId,
  token: Buffer.from(`${path}${messageId}`),
  options: [
    { name: 'Uri-Path' as const, value: Buffer.from(path) },
    { name: 'Block1' as const, value: encodeBlock({ num: 0, more: true, szx: 6 }) },
  ],
  payload: Buffer.alloc(1024, 0x20),
});

describe('coaps Block1 upload budget', () => {
  it("32 sessions of one device, each starting two uploads and abandoning them, leave room for another device's upload", async () => {
    const peers: DtlsCoapPeer[] = [];
    try {
      const codes: string[] = [];
      for (let i = 0; i < 32; i++) {
        const peer = await DtlsCoapPeer.connect(world.coapsPort, world.device.identity, Buffer.from(world.device.key));
        peers.push(peer);
        for (const path of ['a', 'b']) codes.push((await peer.exchange(firstBlock(path, peers.length * 2 + codes.length))).code);
      }
      // the device's share is what one session may hold: its first two uploads, then 5.03
      expect(codes.filter((c) => c === '2.31')).toHaveLength(2);
      expect(codes.filter((c) => c === '5.03')).toHaveLength(62);

      const other = await world.newDevice();
      const peer = await DtlsCoapPeer.connect(world.coapsPort, other.identity, Buffer.from(other.key));
      peers.push(peer);
      const r = report(4);
      const block = (num: number, more: boolean, payload: Buffer) => ({
        confirmable: true,
        code: 'POST' as const,
        messageId: 7000 + num,
        token: Buffer.from([num, 7]),
        options: [
          { name: 'Uri-Path' as const, value: Buffer.from('report') },
          { name: 'Content-Format' as const, value: encodeUint(50) },
          { name: 'Block1' as const, value: encodeBlock({ num, more, szx: 5 }) },
        ],
        payload,
      });
      // the limit is 1024 bytes: two blocks of 512 fill it, so the report goes in 512-byte blocks, a shorter body
      const short = Buffer.from(JSON.stringify({ ...JSON.parse(r.body), pad: 'x'.repeat(600) }));
      expect(short.length).toBeGreaterThan(512);
      expect(short.length).toBeLessThanOrEqual(1024);
      expect((await peer.exchange(block(0, true, short.subarray(0, 512)))).code).toBe('2.31');
      const last = await peer.exchange(block(1, false, short.subarray(512)));
      expect(last.code).toBe('2.05');
      expect(JSON.parse(last.payload.toString())).toEqual({ ok: true, device: other.identity, m: r.m });
    } finally {
      for (const p of peers) p.close();
    }
  });
});
