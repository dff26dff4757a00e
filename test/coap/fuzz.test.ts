/**
 * Seeded fuzzes of CoAP: the plain CoAP port of the whole service, from sockets with no credentials; and the exchange
 * layer past admission (what a DTLS session's datagrams reach: block-wise transfers, deduplication, answers).
 */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { generate, parse } from 'coap-packet';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoapUdpServer } from '../../src/coap/index.ts';
import { encodeUint } from '../../src/coap/message.ts';
import { coapDatagram, collectGarbage, fuzzCoapPort } from '../support/coap-fuzz.ts';
import { until } from '../support/until.ts';
import { DtlsCoapPeer, plainExchange, report, startCoapWorld, type CoapWorld } from './support.ts';

let world: CoapWorld;
let plainPort: number;
const identity = `fuzz-${randomBytes(4).toString('hex')}`;
beforeAll(async () => {
  world = await startCoapWorld({ COAP_PORT: '0', COAP_PLAIN_IDENTITIES: identity }, identity);
  plainPort = world.service.coap!.coapPort()!;
});
afterAll(async () => {
  await world?.close();
});

/** A report of the listed identity over plain CoAP: the service's answer. */
async function honestReport(messageId: number): Promise<{ code: string; body: unknown; m: string }> {
  const r = report(5);
  const answer = await plainExchange(
    plainPort,
    generate({
      confirmable: true,
      code: 'POST',
      messageId,
      token: Buffer.from('ok'),
      options: [
        { name: 'Uri-Path', value: Buffer.from('report') },
        { name: 'Uri-Query', value: Buffer.from(`psk-identity=${identity}`) },
        { name: 'Content-Format', value: encodeUint(50) },
      ],
      payload: Buffer.from(r.body),
    }),
  );
  return { code: answer.code, body: JSON.parse(answer.payload.toString()), m: r.m };
}

const failuresCounted = async (protocol = 'coap') => {
  const text = await (await fetch(`http://127.0.0.1:${world.service.apiPort()}/metrics`)).text();
  return Number(new RegExp(`gridgate_gateway_coap_failures_total\\{protocol="${protocol}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
};

describe('plain CoAP port under fuzz', () => {
  it('3,000 generated datagrams from 16 sockets: none throws or is answered with more bytes than it had; an honest report is served after; the heap returns near its level', async () => {
    const warm = await honestReport(1);
    expect(warm.code).toBe('2.05');
    collectGarbage();
    const heapBefore = process.memoryUsage().heapUsed;

    const outcome = await fuzzCoapPort(plainPort, { seed: 20261127, numRuns: 3000, sockets: 16 });
    expect(outcome.datagrams).toBe(3000);
    expect(outcome.answered).toBeGreaterThan(500); // the generator reaches past the framing checks
    expect(outcome.amplified).toEqual([]);
    expect(await failuresCounted()).toBe(0);

    const after = await honestReport(2);
    expect(after).toEqual({ code: '2.05', body: { ok: true, device: identity, m: after.m }, m: after.m });
    collectGarbage();
    // no state is kept for unauthenticated peers: what the fuzz allocated is garbage (the bound leaves room for the
    // service's own caches and the report's pipeline, a few MB at most)
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(8 * 1024 * 1024);
  });
});

describe('the CoAP exchange layer past admission under fuzz', () => {
  it('3,000 generated datagrams to a listener that admits everything: none throws, and an ordinary request is answered after', async () => {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
    // answers three times the request's body: large ones go out in Block2 blocks and are kept for the next block
    const server = new CoapUdpServer({
      socket,
      maxBodyBytes: 4096,
      handler: async (req) => ({
        code: '2.05',
        options: [{ name: 'Content-Format', value: encodeUint(42) }],
        payload: Buffer.alloc(Math.min(3 * req.payload.length, 8000), 0x61),
      }),
    });
    const failures: Error[] = [];
    server.on('failure', (err: Error) => failures.push(err));
    const client = dgram.createSocket('udp4');
    try {
      const outcome = await fuzzCoapPort(socket.address().port, { seed: 20261128, numRuns: 3000, sockets: 4 });
      expect(outcome.datagrams).toBe(3000);
      expect(outcome.answered).toBeGreaterThan(500);
      expect(failures).toEqual([]);
      await new Promise<void>((r) => client.bind(0, '127.0.0.1', r));
      const answer = await new Promise<Buffer>((resolve) => {
        client.once('message', resolve);
        client.send(
          generate({ confirmable: true, code: 'POST', messageId: 9, token: Buffer.from('ok'), payload: Buffer.from('abc') }),
          socket.address().port,
          '127.0.0.1',
        );
      });
      expect(parse(answer)).toMatchObject({ ack: true, code: '2.05', messageId: 9 });
      expect(parse(answer).payload.toString()).toBe('aaaaaaaaa');
    } finally {
      server.close();
      socket.close();
      client.close();
    }
  });
});

describe('a DTLS session of a device carrying fuzzed CoAP', () => {
  it('1,000 generated datagrams in one session of the service: none throws, and the device is answered after on a new session', async () => {
    const datagrams = fc.sample(coapDatagram, { seed: 20261129, numRuns: 1000 }).filter((d) => d.length <= 1000);
    const peer = await DtlsCoapPeer.connect(world.coapsPort, world.device.identity, Buffer.from(world.device.key));
    let pingId = 0xff00;
    /** A ping, sent again every second until its Reset comes (UDP may drop either). */
    const pinged = async () => {
      pingId++;
      const ping = Buffer.from([0x40, 0, pingId >> 8, pingId & 0xff]);
      const reset = Buffer.from([0x70, 0, pingId >> 8, pingId & 0xff]);
      let sentAt = 0;
      await until(
        async () => {
          if (Date.now() - sentAt > 1000) {
            peer.send(ping);
            sentAt = Date.now();
          }
          return peer.raw.some((m) => m.equals(reset));
        },
        Boolean,
        `the Reset to ping ${pingId}`,
      );
    };
    try {
      // the session reaches the exchange layer once its device is looked up
      await pinged();
      const before = peer.raw.length;
      for (const [i, d] of datagrams.entries()) {
        peer.send(d);
        // paced, so that the socket buffers do not drop most of the session's records
        if (i % 25 === 24) await pinged();
      }
      await pinged();
      // besides the pings' Resets, the session's datagrams got answers: they reached the exchange layer
      expect(peer.raw.length - before - (pingId - 0xff01)).toBeGreaterThan(100);
    } finally {
      peer.close();
    }
    expect(await failuresCounted('coaps')).toBe(0);
    const honest = await DtlsCoapPeer.connect(world.coapsPort, world.device.identity, Buffer.from(world.device.key));
    try {
      const r = report(6);
      const answer = await honest.exchange(
        {
          code: 'POST',
          messageId: 1,
          token: Buffer.from('ok'),
          options: [
            { name: 'Uri-Path', value: Buffer.from('report') },
            { name: 'Content-Format', value: encodeUint(50) },
          ],
          payload: Buffer.from(r.body),
        },
        30_000,
      );
      expect(answer.code).toBe('2.05');
      expect(JSON.parse(answer.payload.toString())).toEqual({ ok: true, device: world.device.identity, m: r.m });
    } finally {
      honest.close();
    }
  });
});
