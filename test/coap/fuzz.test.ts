/** A seeded fuzz of the plain CoAP port of the whole service, from sockets with no credentials. */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { generate, parse } from 'coap-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeUint } from '../../src/coap/message.ts';
import { collectGarbage, fuzzCoapPort } from '../support/coap-fuzz.ts';
import { report, startCoapWorld, type CoapWorld } from './support.ts';

let world: CoapWorld;
let plainPort: number;
const identity = `fuzz-${randomBytes(4).toString('hex')}`;
beforeAll(async () => {
  world = await startCoapWorld({ COAP_PORT: '0', COAP_PLAIN_IDENTITIES: identity }, identity);
  plainPort = world.service.coap!.coapPort()!;
});
afterAll(async () => { await world?.close(); });

/** A report of the listed identity over plain CoAP: the service's answer. */
async function honestReport(messageId: number): Promise<{ code: string; body: unknown; m: string }> {
  const r = report(5);
  const socket = dgram.createSocket('udp4');
  try {
    const answer = await new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no CoAP answer')), 15_000);
      socket.on('message', (m) => { clearTimeout(timer); resolve(m); });
      socket.send(generate({
        confirmable: true, code: 'POST', messageId, token: Buffer.from('ok'),
        options: [{ name: 'Uri-Path', value: Buffer.from('report') }, { name: 'Uri-Query', value: Buffer.from(`psk-identity=${identity}`) }, { name: 'Content-Format', value: encodeUint(50) }],
        payload: Buffer.from(r.body),
      }), plainPort, '127.0.0.1');
    });
    const p = parse(answer);
    return { code: p.code, body: JSON.parse(p.payload.toString()), m: r.m };
  } finally {
    socket.close();
  }
}

const failuresCounted = async () => {
  const text = await (await fetch(`http://127.0.0.1:${world.service.apiPort()}/metrics`)).text();
  return Number(/gridgate_gateway_coap_failures_total\{protocol="coap"\} (\d+)/.exec(text)?.[1] ?? 0);
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
