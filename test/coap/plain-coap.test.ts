/** Plain CoAP (COAP_PORT set): only identities the operator listed, named by the device in Uri-Query psk-identity. */
import dgram from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { generate, parse } from 'coap-packet';
import type { ParsedPacket } from 'coap-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeUint } from '../../src/coap/message.ts';
import { report, run, runsLogging, startCoapWorld, storedAt, type CoapWorld } from './support.ts';

let world: CoapWorld;
let plainPort: number;
const identity = `plain-${randomBytes(4).toString('hex')}`;
beforeAll(async () => {
  world = await startCoapWorld({ COAP_PORT: '0', COAP_PLAIN_IDENTITIES: `someone-else, ${identity}` }, identity);
  plainPort = world.service.coap!.coapPort()!;
});
afterAll(async () => { await world?.close(); });

async function exchange(datagram: Buffer): Promise<ParsedPacket> {
  const socket = dgram.createSocket('udp4');
  try {
    return await new Promise<ParsedPacket>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no CoAP answer')), 10_000);
      socket.on('message', (m) => {
        clearTimeout(timer);
        resolve(parse(m));
      });
      socket.send(datagram, plainPort, '127.0.0.1');
    });
  } finally {
    socket.close();
  }
}

const post = (query: string[], body: string) => generate({
  confirmable: true, code: 'POST', messageId: 1, token: Buffer.from('p'),
  options: [{ name: 'Uri-Path', value: Buffer.from('report') }, ...query.map((q) => ({ name: 'Uri-Query' as const, value: Buffer.from(q) })), { name: 'Content-Format', value: encodeUint(50) }],
  payload: Buffer.from(body),
});

describe('plain CoAP listener', () => {
  it('coap-client-openssl: a listed identity reports over plain CoAP; the handler sees protocol coap without the identity parameter', async () => {
    const r = report(8);
    const res = await run('coap-client-openssl', ['-B', '10', '-m', 'post', '-t', '50', '-e', r.body, `coap://127.0.0.1:${plainPort}/report?psk-identity=${identity}`]);
    expect(JSON.parse(res.stdout)).toEqual({ ok: true, device: identity, m: r.m });
    expect(await storedAt(world, r.t)).toEqual([8000]);
    const runs = await runsLogging(world.api, `m=${r.m}`);
    expect(runs.map((a) => a.log[0].message)).toEqual([`coap POST /report from ${identity} {} m=${r.m}`]);
  });

  it('no identity, an unlisted identity, or a listed one that is no device: 4.01 and nothing queued', async () => {
    const r = report(9);
    for (const query of [[], ['psk-identity=not-listed'], ['psk-identity=someone-else']]) {
      const res = await exchange(post(query, r.body));
      expect(res).toMatchObject({ ack: true, code: '4.01' });
      expect(JSON.parse(res.payload.toString())).toMatchObject({ key: 'authentication_error' });
    }
    expect(await storedAt(world, r.t)).toEqual([]);
    expect(await runsLogging(world.api, `m=${r.m}`)).toEqual([]);
    const metrics = await (await fetch(`http://127.0.0.1:${world.service.apiPort()}/metrics`)).text();
    expect(metrics).toMatch(/gridgate_gateway_handshake_failures_total\{protocol="coap"\} [1-9]/);
  });
});
