/** Plain CoAP (COAP_PORT set): only identities the operator listed, named by the device in Uri-Query psk-identity. */
import { randomBytes } from 'node:crypto';
import { generate, parse } from 'coap-packet';
import type { ParsedPacket } from 'coap-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeUint } from '../../src/coap/message.ts';
import { plainExchange, plainExchangeRaw, report, run, runsLogging, startCoapWorld, storedAt, type CoapWorld } from './support.ts';

let world: CoapWorld;
let plainPort: number;
const identity = `plain-${randomBytes(4).toString('hex')}`;
beforeAll(async () => {
  world = await startCoapWorld({ COAP_PORT: '0', COAP_PLAIN_IDENTITIES: `someone-else, ${identity}` }, identity);
  plainPort = world.service.coap!.coapPort()!;
});
afterAll(async () => {
  await world?.close();
});

const exchangeRaw = (datagram: Buffer): Promise<Buffer[]> => plainExchangeRaw(plainPort, datagram);
const exchange = (datagram: Buffer): Promise<ParsedPacket> => plainExchange(plainPort, datagram);

/** A CON POST (token 'p') with `count` empty options: the first number `first`, then `step` apart. */
function manyOptions(count: number, first: number, step: number): Buffer {
  const options: number[] = [];
  let previous = 0;
  for (let i = 0; i < count; i++) {
    const delta = (i === 0 ? first : previous + step) - previous;
    previous += delta;
    // deltas here stay below 269: one extension byte at most
    options.push(...(delta < 13 ? [delta << 4] : [0xd0, delta - 13]));
  }
  return Buffer.from([0x41, 0x02, 0x12, 0x34, 0x70, ...options]);
}

const post = (query: string[], body: string) =>
  generate({
    confirmable: true,
    code: 'POST',
    messageId: 1,
    token: Buffer.from('p'),
    options: [
      { name: 'Uri-Path', value: Buffer.from('report') },
      ...query.map((q) => ({ name: 'Uri-Query' as const, value: Buffer.from(q) })),
      { name: 'Content-Format', value: encodeUint(50) },
    ],
    payload: Buffer.from(body),
  });

describe('plain CoAP listener', () => {
  it('coap-client-openssl: a listed identity reports over plain CoAP; the handler sees protocol coap without the identity parameter', async () => {
    const r = report(8);
    const res = await run('coap-client-openssl', [
      '-B',
      '10',
      '-m',
      'post',
      '-t',
      '50',
      '-e',
      r.body,
      `coap://127.0.0.1:${plainPort}/report?psk-identity=${identity}`,
    ]);
    expect(JSON.parse(res.stdout)).toEqual({ ok: true, device: identity, m: r.m });
    expect(await storedAt(world, r.t)).toEqual([8000]);
    const runs = await runsLogging(world.api, `m=${r.m}`);
    expect(runs.map((a) => a.log[0].message)).toEqual([`coap POST /report from ${identity} {} m=${r.m}`]);
  });

  it('no identity, an unlisted identity, or a listed one that is no device: 4.01 and nothing queued', async () => {
    const r = report(9);
    // a body large enough that the refusal's diagnostic fits within the request (answers never exceed it)
    const body = JSON.stringify({ ...JSON.parse(r.body), pad: 'x'.repeat(200) });
    for (const query of [[], ['psk-identity=not-listed'], ['psk-identity=someone-else']]) {
      const res = await exchange(post(query, body));
      expect(res).toMatchObject({ ack: true, code: '4.01' });
      expect(JSON.parse(res.payload.toString())).toMatchObject({ key: 'authentication_error' });
    }
    expect(await storedAt(world, r.t)).toEqual([]);
    expect(await runsLogging(world.api, `m=${r.m}`)).toEqual([]);
    const metrics = await (await fetch(`http://127.0.0.1:${world.service.apiPort()}/metrics`)).text();
    expect(metrics).toMatch(/gridgate_gateway_handshake_failures_total\{protocol="coap"\} [1-9]/);
  });

  it('12,000 unknown critical options from an unknown peer: an answer no larger than the datagram, and the service keeps serving', async () => {
    const attack = manyOptions(12_000, 41, 2);
    expect(attack.length).toBe(12_006);
    const [answer, ...more] = await exchangeRaw(attack);
    expect(more).toEqual([]);
    expect(answer.length).toBeLessThanOrEqual(attack.length);
    expect(parse(answer)).toMatchObject({ ack: true, code: '4.02', messageId: 0x1234 });
    const r = report(10);
    const res = await exchange(post([`psk-identity=${identity}`], r.body));
    expect(res).toMatchObject({ ack: true, code: '2.05' });
    expect(JSON.parse(res.payload.toString())).toEqual({ ok: true, device: identity, m: r.m });
  });

  it('no answer to an unauthenticated request is larger than the datagram that triggered it', async () => {
    const attacks = [
      manyOptions(1000, 41, 2), // 4.02 naming unknown critical options
      generate({ confirmable: true, code: '0.08', messageId: 2, token: Buffer.from('t') }), // 4.05, unknown method
      generate({ confirmable: true, code: 'GET', messageId: 3, token: Buffer.from('t'), options: [{ name: 'Proxy-Uri', value: Buffer.from('coap://x') }] }), // 5.05
      post([], '{}'), // 4.01 without an identity
      post(['psk-identity=someone-else'], ''), // 4.01: listed, but no such device
    ];
    for (const attack of attacks) {
      const answers = await exchangeRaw(attack);
      for (const answer of answers) expect(answer.length, parse(answer).code).toBeLessThanOrEqual(attack.length);
      expect(parse(answers.at(-1)!).code[0]).toMatch(/[45]/);
    }
  });
});
