/** The CoAP exchange layer alone, driven with coap-packet-built datagrams through an in-memory transport. */
import dgram from 'node:dgram';
import { generate, parse } from 'coap-packet';
import type { ParsedPacket, Packet } from 'coap-packet';
import { describe, expect, it } from 'vitest';
import { CoapEndpoint, CoapUdpServer, DedupLimit, UploadBudget } from '../../src/coap/index.ts';
import type { CoapEndpointOptions, CoapRequest, CoapResponse } from '../../src/coap/index.ts';
import { decodeBlock, encodeBlock } from '../../src/coap/block.ts';
import { decodeUint, encodeUint } from '../../src/coap/message.ts';
import { waitFor as waitForCondition } from '../support/until.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function harness(handler: (req: CoapRequest) => Promise<CoapResponse>, config: Partial<CoapEndpointOptions> = {}) {
  const sent: Buffer[] = [];
  const calls: CoapRequest[] = [];
  const endpoint = new CoapEndpoint({
    ...config,
    send: (d) => sent.push(d),
    handler: (req) => {
      calls.push(req);
      return handler(req);
    },
  });
  const malformed: string[] = [];
  endpoint.on('malformed', (r: string) => malformed.push(r));
  return { endpoint, sent, calls, malformed, parsed: () => sent.map((d) => parse(d)) };
}

const opt = (p: ParsedPacket, name: string) => p.options.find((o) => o.name === name)?.value;
const req = (p: Packet) => generate({ confirmable: true, token: Buffer.from('t0k3'), ...p });
// these tests time retransmissions: the condition is looked at every 5 ms
const waitFor = (cond: () => boolean, ms = 3000) => waitForCondition(cond, ms, 5);

describe('CoAP endpoint: reliability and deduplication', () => {
  it('piggybacks a fast answer on the ACK with the request token', async () => {
    const h = harness(async (r) => ({
      code: '2.05',
      options: [{ name: 'Content-Format', value: encodeUint(50) }],
      payload: Buffer.from(`got ${r.method} ${r.payload}`),
    }));
    h.endpoint.receive(req({ code: 'POST', messageId: 7, options: [{ name: 'Uri-Path', value: Buffer.from('report') }], payload: Buffer.from('{"v":1}') }));
    await waitFor(() => h.sent.length === 1);
    const [res] = h.parsed();
    expect(res).toMatchObject({ ack: true, confirmable: false, code: '2.05', messageId: 7 });
    expect(res.token.toString()).toBe('t0k3');
    expect(res.payload.toString()).toBe('got POST {"v":1}');
    expect(decodeUint(opt(res, 'Content-Format')!)).toBe(50);
    expect(h.calls[0].options.find((o) => o.name === 'Uri-Path')?.value.toString()).toBe('report');
  });

  it('a duplicate CON gets the identical response and the handler runs once', async () => {
    const h = harness(async () => ({ code: '2.04', payload: Buffer.from('once') }));
    const datagram = req({ code: 'POST', messageId: 99, payload: Buffer.from('x') });
    h.endpoint.receive(datagram);
    await waitFor(() => h.sent.length === 1);
    h.endpoint.receive(datagram);
    h.endpoint.receive(datagram);
    await sleep(20);
    expect(h.sent).toHaveLength(3);
    expect(h.sent[1].equals(h.sent[0])).toBe(true);
    expect(h.sent[2].equals(h.sent[0])).toBe(true);
    expect(h.calls).toHaveLength(1);
  });

  it('a slow answer: empty ACK first, then a Confirmable separate response retransmitted until ACKed', async () => {
    let release: (r: CoapResponse) => void = () => {};
    const h = harness(
      () =>
        new Promise((resolve) => {
          release = resolve;
        }),
      { piggybackMs: 40, ackTimeoutMs: 60, ackRandomFactor: 1 },
    );
    const datagram = req({ code: 'POST', messageId: 5, payload: Buffer.from('slow') });
    h.endpoint.receive(datagram);
    h.endpoint.receive(datagram); // duplicate within the window: nothing to repeat yet
    expect(h.sent).toHaveLength(0);
    await waitFor(() => h.sent.length === 1);
    expect(h.sent[0]).toEqual(Buffer.from([0x60, 0, 0, 5])); // empty ACK
    h.endpoint.receive(datagram); // duplicate after the empty ACK: the empty ACK again
    expect(h.sent).toHaveLength(2);
    expect(h.sent[1]).toEqual(h.sent[0]);
    release({ code: '2.05', payload: Buffer.from('late') });
    await waitFor(() => h.sent.length === 3);
    const separate = parse(h.sent[2]);
    expect(separate).toMatchObject({ confirmable: true, code: '2.05' });
    expect(separate.messageId).not.toBe(5);
    expect(separate.token.toString()).toBe('t0k3');
    expect(separate.payload.toString()).toBe('late');
    await waitFor(() => h.sent.length === 4); // retransmitted after ACK_TIMEOUT
    expect(h.sent[3]).toEqual(h.sent[2]);
    h.endpoint.receive(Buffer.from([0x60, 0, separate.messageId >> 8, separate.messageId & 0xff]));
    await sleep(250);
    expect(h.sent).toHaveLength(4);
    expect(h.endpoint.pending).toBe(0);
    expect(h.calls).toHaveLength(1);
  });

  it('a slow answer to a CON that announces Block2: no empty ACK, duplicates wait, the answer rides on the ACK', async () => {
    let release: (r: CoapResponse) => void = () => {};
    const h = harness(
      () =>
        new Promise((resolve) => {
          release = resolve;
        }),
      { piggybackMs: 10 },
    );
    const datagram = req({ code: 'GET', messageId: 6, options: [{ name: 'Block2', value: encodeBlock({ num: 0, more: false, szx: 2 }) }] });
    h.endpoint.receive(datagram);
    await sleep(60);
    h.endpoint.receive(datagram); // the client's retransmission: still nothing to send
    expect(h.sent).toHaveLength(0);
    release({ code: '2.05', payload: Buffer.from('x'.repeat(200)) });
    await waitFor(() => h.sent.length === 1);
    const first = parse(h.sent[0]);
    expect(first).toMatchObject({ ack: true, code: '2.05', messageId: 6 });
    expect(decodeBlock(opt(first, 'Block2')!)).toEqual({ num: 0, more: true, szx: 2 });
    h.endpoint.receive(datagram); // a late duplicate gets the same ACK
    expect(h.sent[1]).toEqual(h.sent[0]);
    expect(h.calls).toHaveLength(1);
  });

  it('gives up after MAX_RETRANSMIT retransmissions with doubling waits', async () => {
    const h = harness(
      async () => {
        await sleep(30);
        return { code: '2.05' };
      },
      { piggybackMs: 1, ackTimeoutMs: 10, ackRandomFactor: 1, maxRetransmit: 4 },
    );
    const gaveUp: number[] = [];
    h.endpoint.on('giveUp', (id: number) => gaveUp.push(id));
    h.endpoint.receive(req({ code: 'GET', messageId: 1 }));
    await waitFor(() => gaveUp.length === 1, 2000);
    const cons = h.parsed().filter((p) => p.confirmable);
    expect(cons).toHaveLength(5); // the response and 4 retransmissions, 10+20+40+80+160 ms apart
    expect(new Set(cons.map((c) => c.messageId)).size).toBe(1);
    expect(h.endpoint.pending).toBe(0);
  });

  it('a NON request gets a NON response; a duplicate NON is ignored', async () => {
    const h = harness(async () => ({ code: '2.05', payload: Buffer.from('n') }));
    const datagram = generate({ confirmable: false, code: 'GET', messageId: 11, token: Buffer.from('a') });
    h.endpoint.receive(datagram);
    h.endpoint.receive(datagram);
    await waitFor(() => h.sent.length === 1);
    await sleep(20);
    expect(h.sent).toHaveLength(1);
    expect(parse(h.sent[0])).toMatchObject({ confirmable: false, ack: false, reset: false, code: '2.05' });
    expect(h.calls).toHaveLength(1);
  });

  it('a NON request with No-Response (RFC 7967) gets no response of the classes it declines', async () => {
    const h = harness(async (r) => ({ code: r.payload.toString() }));
    const non = (id: number, mask: number, code: string) =>
      generate({
        confirmable: false,
        code: 'POST',
        messageId: id,
        token: Buffer.from([id]),
        options: [{ name: 'No-Response', value: encodeUint(mask) }],
        payload: Buffer.from(code),
      });
    h.endpoint.receive(non(1, 2, '2.04')); // declines 2.xx
    h.endpoint.receive(non(2, 2, '4.00')); // declines 2.xx only: 4.00 comes
    h.endpoint.receive(non(3, 26, '5.00')); // declines all
    h.endpoint.receive(non(4, 0, '2.05')); // 0: interested in everything
    await sleep(30);
    expect(h.calls).toHaveLength(4);
    expect(h.parsed().map((p) => [p.code, p.token[0]])).toEqual([
      ['4.00', 2],
      ['2.05', 4],
    ]);
  });

  it('remembers at most maxDedupEntries message ids', async () => {
    const h = harness(async () => ({ code: '2.04' }), { maxDedupEntries: 16, maxInFlight: 100 });
    for (let id = 0; id < 40; id++) h.endpoint.receive(req({ code: 'POST', messageId: id }));
    await waitFor(() => h.sent.length === 40);
    expect(h.endpoint.remembered).toBe(16);
    h.endpoint.receive(req({ code: 'POST', messageId: 39 })); // still remembered: answered from the store
    h.endpoint.receive(req({ code: 'POST', messageId: 0 })); // forgotten: a new request
    await waitFor(() => h.sent.length === 42);
    expect(h.calls).toHaveLength(41);
  });

  it('a shared DedupLimit bounds the message ids of all its endpoints together, the oldest of any peer forgotten first', async () => {
    const limit = new DedupLimit(10);
    const a = harness(async () => ({ code: '2.04' }), { dedupLimit: limit, maxInFlight: 100 });
    const b = harness(async () => ({ code: '2.04' }), { dedupLimit: limit, maxInFlight: 100 });
    for (let id = 0; id < 8; id++) a.endpoint.receive(req({ code: 'POST', messageId: id }));
    for (let id = 0; id < 8; id++) b.endpoint.receive(req({ code: 'POST', messageId: id }));
    await waitFor(() => a.sent.length === 8 && b.sent.length === 8);
    expect(limit.size).toBe(10);
    expect([a.endpoint.remembered, b.endpoint.remembered]).toEqual([2, 8]);
    a.endpoint.receive(req({ code: 'POST', messageId: 7 })); // still remembered: answered from the store
    a.endpoint.receive(req({ code: 'POST', messageId: 0 })); // forgotten for b's: a new request
    await waitFor(() => a.sent.length === 10);
    expect(a.calls).toHaveLength(9);
    expect(limit.size).toBe(10);
  });

  it('a request refused before admission, or whose handler refuses it, leaves no message id behind', async () => {
    const h = harness(async () => ({ code: '4.01', refused: true }), { admit: (r) => (r.method === 'GET' ? { code: '4.01' } : null) });
    h.endpoint.receive(req({ code: 'GET', messageId: 1 })); // admit refuses
    h.endpoint.receive(req({ code: '0.08', messageId: 2 })); // no such method
    h.endpoint.receive(req({ code: 'POST', messageId: 3, options: [{ name: '9', value: Buffer.alloc(0) }] })); // unknown critical option
    h.endpoint.receive(req({ code: 'POST', messageId: 4 })); // the handler refuses
    await waitFor(() => h.sent.length === 4);
    expect(h.parsed().map((p) => p.code)).toEqual(['4.01', '4.05', '4.02', '4.01']);
    expect(h.endpoint.remembered).toBe(0);
    expect(h.endpoint.idle).toBe(true);
  });

  it("refused requests take no room in a shared DedupLimit: another peer's message ids stay", async () => {
    const limit = new DedupLimit(2);
    const a = harness(async () => ({ code: '2.04' }), { dedupLimit: limit });
    const b = harness(async () => ({ code: '2.04' }), { dedupLimit: limit, admit: () => ({ code: '4.01' }) });
    a.endpoint.receive(req({ code: 'POST', messageId: 1 }));
    a.endpoint.receive(req({ code: 'POST', messageId: 2 }));
    for (let id = 1; id <= 5; id++) b.endpoint.receive(req({ code: 'POST', messageId: id }));
    expect(b.sent).toHaveLength(5);
    expect(a.endpoint.remembered).toBe(2);
    expect(limit.size).toBe(2);
  });

  it('a 4.02 names at most 8 unknown critical options and counts the rest', async () => {
    const h = harness(async () => ({ code: '2.05' }));
    const options = Array.from({ length: 20 }, (_, i) => ({ name: String(41 + 2 * i), value: Buffer.alloc(0) }));
    h.endpoint.receive(req({ code: 'POST', messageId: 1, options }));
    expect(parse(h.sent[0]).payload.toString()).toBe('unrecognised critical option 41, 43, 45, 47, 49, 51, 53, 55 and 12 more');
  });

  it('a peer with maxInFlight requests running gets 5.03 with Max-Age for the next, and is served again after', async () => {
    const releases: (() => void)[] = [];
    const h = harness((r) => new Promise((resolve) => releases.push(() => resolve({ code: '2.04', payload: r.payload }))), {
      maxInFlight: 2,
      piggybackMs: 5000,
    });
    for (let id = 1; id <= 3; id++) h.endpoint.receive(req({ code: 'POST', messageId: id, payload: Buffer.from([id]) }));
    expect(h.parsed().map((p) => [p.code, p.messageId])).toEqual([['5.03', 3]]);
    expect(decodeUint(opt(h.parsed()[0], 'Max-Age')!)).toBe(1);
    for (const release of releases) release();
    await waitFor(() => h.sent.length === 3);
    h.endpoint.receive(req({ code: 'POST', messageId: 4, payload: Buffer.from([4]) }));
    await sleep(10);
    releases[2]();
    await waitFor(() => h.sent.length === 4);
    expect(h.parsed().map((p) => p.code)).toEqual(['5.03', '2.04', '2.04', '2.04']);
    expect(h.calls).toHaveLength(3);
  });

  it('a handler that throws before returning a promise answers 5.00 and leaves nothing pending', async () => {
    const h = harness((() => {
      throw new Error('at once');
    }) as () => Promise<CoapResponse>);
    h.endpoint.receive(req({ code: 'POST', messageId: 3 }));
    await waitFor(() => h.sent.length === 1);
    expect(parse(h.sent[0])).toMatchObject({ code: '5.00', ack: true });
    await waitFor(() => h.endpoint.pending === 0);
  });

  it('a diagnostic that throws while answering a failed handler is emitted as failure, nothing left pending', async () => {
    const failures: string[] = [];
    const h = harness(
      async () => {
        throw new Error('handler');
      },
      {
        diagnostic: () => {
          throw new Error('diagnostic');
        },
      },
    );
    h.endpoint.on('failure', (err: Error) => failures.push(err.message));
    h.endpoint.receive(req({ code: 'POST', messageId: 3 }));
    await waitFor(() => failures.length === 1);
    expect(failures).toEqual(['diagnostic']);
    await waitFor(() => h.endpoint.pending === 0);
  });

  it('a handler that throws answers 5.00', async () => {
    const h = harness(async () => {
      throw new Error('boom');
    });
    h.endpoint.receive(req({ code: 'POST', messageId: 3 }));
    await waitFor(() => h.sent.length === 1);
    expect(parse(h.sent[0])).toMatchObject({ code: '5.00', ack: true });
  });
});

describe('CoAP endpoint: malformed and unexpected messages', () => {
  it('drops garbage, Resets a malformed CON, answers a ping with RST, and keeps serving', async () => {
    const h = harness(async () => ({ code: '2.05', payload: Buffer.from('fine') }));
    h.endpoint.receive(Buffer.from([0x40])); // runt
    h.endpoint.receive(Buffer.from([0x80, 1, 0, 1])); // version 2: silently ignored
    h.endpoint.receive(Buffer.from([0x49, 1, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9])); // CON, token length 9: RST
    h.endpoint.receive(Buffer.from([0x40, 1, 0, 3, 0xb5, 0x61])); // CON GET, Uri-Path of 5 bytes with 1 present: RST
    h.endpoint.receive(Buffer.from([0x50, 1, 0, 4, 0xff])); // NON with a payload marker and no payload: dropped
    h.endpoint.receive(Buffer.from([0x40, 0, 0, 5])); // CoAP ping: RST
    h.endpoint.receive(Buffer.from([0x40, 0x45, 0, 6])); // a CON 2.05 response we never asked for: RST
    h.endpoint.receive(Buffer.from([0x60, 0, 0x12, 0x34])); // stray ACK: ignored
    for (let i = 0; i < 200; i++) {
      const junk = Buffer.from(Array.from({ length: 1 + (i % 40) }, (_, j) => (i * 31 + j * 17) & 0xff));
      expect(() => h.endpoint.receive(junk)).not.toThrow();
    }
    expect(h.sent.slice(0, 4)).toEqual([
      Buffer.from([0x70, 0, 0, 2]),
      Buffer.from([0x70, 0, 0, 3]),
      Buffer.from([0x70, 0, 0, 5]),
      Buffer.from([0x70, 0, 0, 6]),
    ]);
    expect(h.malformed.slice(0, 4)).toEqual([
      'shorter than the 4-byte header',
      'unknown version',
      'token length 9..15 is reserved',
      'option value runs past the datagram',
    ]);
    const before = h.sent.length;
    h.endpoint.receive(req({ code: 'GET', messageId: 4242 }));
    await waitFor(() => h.sent.length === before + 1);
    expect(parse(h.sent[before]).payload.toString()).toBe('fine');
  });

  it('an unrecognised critical option is 4.02, a Proxy-Uri 5.05, and the handler does not run', async () => {
    const h = harness(async () => ({ code: '2.05' }));
    h.endpoint.receive(req({ code: 'GET', messageId: 1, options: [{ name: '9', value: Buffer.from([1]) }] }));
    h.endpoint.receive(req({ code: 'GET', messageId: 2, options: [{ name: 'Proxy-Uri', value: Buffer.from('coap://x/') }] }));
    h.endpoint.receive(
      req({
        code: 'GET',
        messageId: 3,
        options: [
          { name: '258', value: Buffer.from([2]) },
          { name: '65000', value: Buffer.from([1]) },
        ],
      }),
    ); // elective ones are fine
    await waitFor(() => h.sent.length === 3);
    expect(h.parsed().map((p) => p.code)).toEqual(['4.02', '5.05', '2.05']);
    expect(h.calls).toHaveLength(1);
  });
});

describe('CoAP endpoint: block-wise transfers (RFC 7959)', () => {
  const block1 = (num: number, more: boolean, szx: number) => ({ name: 'Block1' as const, value: encodeBlock({ num, more, szx }) });

  it('reassembles a Block1 upload: 2.31 Continue per block, the handler sees the whole body once', async () => {
    const h = harness(async (r) => ({ code: '2.04', payload: Buffer.from(`len ${r.payload.length}`) }), { maxBodyBytes: 100 });
    const body = Buffer.from('0123456789abcdef'.repeat(2) + 'tail');
    const path = { name: 'Uri-Path' as const, value: Buffer.from('up') };
    h.endpoint.receive(req({ code: 'PUT', messageId: 1, options: [path, block1(0, true, 0)], payload: body.subarray(0, 16) }));
    h.endpoint.receive(req({ code: 'PUT', messageId: 2, options: [path, block1(1, true, 0)], payload: body.subarray(16, 32) }));
    h.endpoint.receive(req({ code: 'PUT', messageId: 3, options: [path, block1(2, false, 0)], payload: body.subarray(32) }));
    await waitFor(() => h.sent.length === 3);
    const [c0, c1, last] = h.parsed();
    expect([c0.code, c1.code, last.code]).toEqual(['2.31', '2.31', '2.04']);
    expect(decodeBlock(opt(c1, 'Block1')!)).toEqual({ num: 1, more: true, szx: 0 });
    expect(decodeBlock(opt(last, 'Block1')!)).toEqual({ num: 2, more: false, szx: 0 });
    expect(last.payload.toString()).toBe('len 36');
    expect(h.calls).toHaveLength(1);
    expect(h.calls[0].payload).toEqual(body);
  });

  it('refuses an out-of-order block with 4.08 and a body over the limit with 4.13 and Size1', async () => {
    const h = harness(async () => ({ code: '2.04' }), { maxBodyBytes: 40 });
    const sixteen = Buffer.alloc(16, 1);
    h.endpoint.receive(req({ code: 'POST', messageId: 1, options: [block1(1, true, 0)], payload: sixteen }));
    h.endpoint.receive(req({ code: 'POST', messageId: 2, options: [block1(0, true, 0)], payload: sixteen }));
    h.endpoint.receive(req({ code: 'POST', messageId: 3, options: [block1(1, true, 0)], payload: sixteen }));
    h.endpoint.receive(req({ code: 'POST', messageId: 4, options: [block1(2, true, 0)], payload: sixteen }));
    h.endpoint.receive(req({ code: 'POST', messageId: 5, options: [block1(0, true, 0), { name: 'Size1', value: encodeUint(41) }], payload: sixteen }));
    h.endpoint.receive(req({ code: 'POST', messageId: 6, payload: Buffer.alloc(41) }));
    await waitFor(() => h.sent.length === 6);
    const res = h.parsed();
    expect(res.map((p) => p.code)).toEqual(['4.08', '2.31', '2.31', '4.13', '4.13', '4.13']);
    for (const r of res.slice(3)) expect(decodeUint(opt(r, 'Size1')!)).toBe(40);
    expect(res[3].payload.toString()).toBe('body exceeds 40 bytes');
    expect(h.calls).toHaveLength(0);
  });

  it('serves a large answer in Block2 blocks of the size the client asked for, Size2 and ETag, handler run once', async () => {
    const answer = Buffer.from(Array.from({ length: 3000 }, (_, i) => i & 0xff));
    const h = harness(async () => ({ code: '2.05', options: [{ name: 'Content-Format', value: encodeUint(42) }], payload: answer }));
    const path = { name: 'Uri-Path' as const, value: Buffer.from('big') };
    const got: Buffer[] = [];
    let etag: Buffer | undefined;
    for (let num = 0; ; num++) {
      h.endpoint.receive(req({ code: 'GET', messageId: 100 + num, options: [path, { name: 'Block2', value: encodeBlock({ num, more: false, szx: 2 }) }] }));
      await waitFor(() => h.sent.length === num + 1);
      const res = parse(h.sent[num]);
      expect(res.code).toBe('2.05');
      expect(decodeUint(opt(res, 'Size2')!)).toBe(3000);
      expect(decodeUint(opt(res, 'Content-Format')!)).toBe(42);
      etag ??= opt(res, 'ETag');
      expect(opt(res, 'ETag')).toEqual(etag);
      const b = decodeBlock(opt(res, 'Block2')!)!;
      expect(b.num).toBe(num);
      expect(b.szx).toBe(2);
      got.push(res.payload);
      if (!b.more) break;
      expect(res.payload.length).toBe(64);
    }
    expect(got).toHaveLength(47);
    expect(Buffer.concat(got)).toEqual(answer);
    expect(h.calls).toHaveLength(1);
  });

  it('unfinished uploads of all endpoints share one byte budget: 5.03 when spent, returned when an upload ends', async () => {
    const budget = new UploadBudget(48);
    const a = harness(async (r) => ({ code: '2.04', payload: Buffer.from(String(r.payload.length)) }), { uploadBudget: budget });
    const b = harness(async (r) => ({ code: '2.04', payload: Buffer.from(String(r.payload.length)) }), { uploadBudget: budget });
    const sixteen = Buffer.alloc(16, 2);
    a.endpoint.receive(req({ code: 'POST', messageId: 1, options: [block1(0, true, 0)], payload: sixteen }));
    a.endpoint.receive(req({ code: 'POST', messageId: 2, options: [block1(1, true, 0)], payload: sixteen }));
    b.endpoint.receive(req({ code: 'POST', messageId: 1, options: [block1(0, true, 0)], payload: sixteen }));
    expect(budget.available).toBe(0);
    b.endpoint.receive(req({ code: 'POST', messageId: 2, options: [block1(1, true, 0)], payload: sixteen }));
    expect(b.parsed().map((p) => p.code)).toEqual(['2.31', '5.03']);
    expect(budget.available).toBe(16); // b's refused upload gave its block back
    a.endpoint.receive(req({ code: 'POST', messageId: 3, options: [block1(2, false, 0)], payload: Buffer.alloc(5) }));
    await waitFor(() => a.sent.length === 3);
    expect(parse(a.sent[2]).payload.toString()).toBe('37');
    expect(budget.available).toBe(48);
  });

  it('an abandoned upload gives its bytes back to the budget blockwiseStatusLifetimeMs after its last block', async () => {
    const budget = new UploadBudget(64);
    const h = harness(async () => ({ code: '2.04' }), { uploadBudget: budget, blockwiseStatusLifetimeMs: 150 });
    h.endpoint.receive(req({ code: 'POST', messageId: 1, options: [block1(0, true, 0)], payload: Buffer.alloc(16) }));
    h.endpoint.receive(req({ code: 'POST', messageId: 2, options: [block1(1, true, 0)], payload: Buffer.alloc(16) }));
    expect(budget.available).toBe(32);
    await waitFor(() => budget.available === 64);
    expect(h.endpoint.idle).toBe(false); // its message ids are still remembered; the upload is gone:
    h.endpoint.receive(req({ code: 'POST', messageId: 3, options: [block1(2, false, 0)], payload: Buffer.alloc(4) }));
    expect(h.parsed().map((p) => p.code)).toEqual(['2.31', '2.31', '4.08']);
  });

  it('one owner (a device, over all its endpoints) holds at most perOwnerBytes of the budget; other owners still upload', async () => {
    const budget = new UploadBudget(1024, 32);
    const sameDevice = Array.from({ length: 3 }, () => harness(async () => ({ code: '2.04' }), { uploadBudget: budget, uploadOwner: () => 'device-a' }));
    const other = harness(async () => ({ code: '2.04' }), { uploadBudget: budget, uploadOwner: () => 'device-b' });
    for (const h of [...sameDevice, other]) h.endpoint.receive(req({ code: 'POST', messageId: 1, options: [block1(0, true, 0)], payload: Buffer.alloc(16) }));
    expect(sameDevice.map((h) => h.parsed().map((p) => p.code))).toEqual([['2.31'], ['2.31'], ['5.03']]);
    expect(other.parsed().map((p) => p.code)).toEqual(['2.31']);
    expect(budget.heldBy('device-a')).toBe(32);
    expect(budget.heldBy('device-b')).toBe(16);
  });

  it('admit refuses a request before any block is buffered', async () => {
    const budget = new UploadBudget(1000);
    const h = harness(async () => ({ code: '2.04' }), {
      uploadBudget: budget,
      admit: (r) => (r.options.some((o) => o.name === 'Uri-Query') ? null : { code: '4.01', payload: Buffer.from('who?') }),
    });
    h.endpoint.receive(req({ code: 'POST', messageId: 1, options: [block1(0, true, 0)], payload: Buffer.alloc(16) }));
    h.endpoint.receive(
      req({ code: 'POST', messageId: 2, options: [{ name: 'Uri-Query', value: Buffer.from('id=x') }, block1(0, true, 0)], payload: Buffer.alloc(16) }),
    );
    expect(h.parsed().map((p) => [p.code, p.payload.toString()])).toEqual([
      ['4.01', 'who?'],
      ['2.31', ''],
    ]);
    expect(budget.available).toBe(984);
    expect(h.calls).toHaveLength(0);
  });

  it('an answer whose options leave no room for 1024-byte blocks goes in smaller ones; every message fits maxMessageBytes', async () => {
    const options = Array.from({ length: 4 }, () => ({ name: '65000', value: Buffer.alloc(100, 0x61) }));
    const answer = Buffer.from(Array.from({ length: 2000 }, (_, i) => i & 0xff));
    const h = harness(async () => ({ code: '2.05', options, payload: answer }), { maxMessageBytes: 1100 });
    const got: Buffer[] = [];
    let next = { num: 0, szx: 6 };
    for (let i = 0; i < 10; i++) {
      h.endpoint.receive(req({ code: 'GET', messageId: 10 + i, options: [{ name: 'Block2', value: encodeBlock({ ...next, more: false }) }] }));
      await waitFor(() => h.sent.length === i + 1);
      expect(h.sent[i].length).toBeLessThanOrEqual(1100);
      const res = parse(h.sent[i]);
      const b = decodeBlock(opt(res, 'Block2')!)!;
      expect(b.szx).toBe(5); // 512: 400 bytes of options leave no room for 1024
      got.push(res.payload);
      if (!b.more) break;
      next = { num: b.num + 1, szx: b.szx }; // the client continues at the server's size (RFC 7959 §2.4)
    }
    expect(Buffer.concat(got)).toEqual(answer);
    expect(h.calls).toHaveLength(1);
    // a client that keeps asking for 1024-byte blocks: its block 1 (offset 1024) comes as block 2 of 512
    h.endpoint.receive(req({ code: 'GET', messageId: 50, options: [{ name: 'Block2', value: encodeBlock({ num: 1, more: false, szx: 6 }) }] }));
    await waitFor(() => h.sent.length === got.length + 1);
    const late = parse(h.sent[got.length]);
    expect(decodeBlock(opt(late, 'Block2')!)).toEqual({ num: 2, more: true, szx: 5 });
    expect(late.payload).toEqual(answer.subarray(1024, 1536));
  });

  it('without a Block2 option a large answer is split at the preferred 1024 bytes', async () => {
    const h = harness(async () => ({ code: '2.05', payload: Buffer.alloc(1500, 7) }));
    h.endpoint.receive(req({ code: 'GET', messageId: 1 }));
    await waitFor(() => h.sent.length === 1);
    const res = parse(h.sent[0]);
    expect(res.payload.length).toBe(1024);
    expect(decodeBlock(opt(res, 'Block2')!)).toEqual({ num: 0, more: true, szx: 6 });
  });
});

/** A UDP socket bound to a port of 127.0.0.1 the OS picks. */
async function boundSocket(): Promise<dgram.Socket> {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
  return socket;
}

/** Sends `datagram` from `client` to `server` and resolves with the first datagram back. */
const ask = (client: dgram.Socket, server: dgram.Socket, datagram: Buffer) =>
  new Promise<Buffer>((resolve) => {
    client.once('message', resolve);
    client.send(datagram, server.address().port, '127.0.0.1');
  });

describe('CoAP over a plain UDP socket', () => {
  it('holds at most maxPeers peers: a new one evicts the longest idle', async () => {
    const socket = await boundSocket();
    const server = new CoapUdpServer({ socket, maxPeers: 2, handler: async () => ({ code: '2.05' }) });
    const clients = await Promise.all([0, 1, 2].map(() => boundSocket()));
    try {
      for (const c of clients) {
        await ask(c, socket, req({ code: 'GET', messageId: 1 }));
        expect(server.peerCount).toBeLessThanOrEqual(2);
      }
      expect(server.peerCount).toBe(2);
    } finally {
      server.close();
      socket.close();
      for (const c of clients) c.close();
    }
  });

  it('an exception while handling a datagram is emitted as failure; the listener keeps serving', async () => {
    const socket = await boundSocket();
    const server = new CoapUdpServer({
      socket,
      handler: async () => ({ code: '2.05', payload: Buffer.from('fine') }),
      diagnostic: () => {
        throw new Error('diagnostic broke');
      },
    });
    const failures: string[] = [];
    server.on('failure', (err: Error) => failures.push(err.message));
    const client = await boundSocket();
    try {
      const answered = new Promise<string>((resolve) => client.once('message', (m) => resolve(parse(m).payload.toString())));
      client.send(req({ code: '0.08', messageId: 1 }), socket.address().port, '127.0.0.1'); // 4.05: its diagnostic throws
      await waitFor(() => failures.length === 1);
      client.send(req({ code: 'GET', messageId: 2 }), socket.address().port, '127.0.0.1');
      expect(await answered).toBe('fine');
      expect(failures).toEqual(['diagnostic broke']);
    } finally {
      server.close();
      socket.close();
      client.close();
    }
  });

  it('keeps no peer for datagrams that leave nothing behind (refused, malformed, pings)', async () => {
    const socket = await boundSocket();
    const server = new CoapUdpServer({ socket, admit: () => ({ code: '4.01' }), handler: async () => ({ code: '2.05' }) });
    const client = await boundSocket();
    let answers = 0;
    client.on('message', () => {
      answers++;
    });
    try {
      for (let id = 1; id <= 20; id++) client.send(req({ code: 'POST', messageId: id }), socket.address().port, '127.0.0.1');
      client.send(Buffer.from([0x40, 0, 0, 99]), socket.address().port, '127.0.0.1'); // ping
      client.send(Buffer.from([0x40, 1, 0, 98, 0xb5]), socket.address().port, '127.0.0.1'); // malformed
      await waitFor(() => answers === 22);
      expect(server.peerCount).toBe(0);
    } finally {
      server.close();
      socket.close();
      client.close();
    }
  });

  it('remembers at most maxDedupTotal message ids over all its peers', async () => {
    const socket = await boundSocket();
    const server = new CoapUdpServer({ socket, maxDedupTotal: 5, handler: async () => ({ code: '2.04' }) });
    const clients = await Promise.all([0, 1, 2].map(() => boundSocket()));
    try {
      for (const c of clients) {
        for (let id = 1; id <= 3; id++) {
          await ask(c, socket, req({ code: 'POST', messageId: id }));
        }
      }
      expect(server.remembered).toBe(5);
    } finally {
      server.close();
      socket.close();
      for (const c of clients) c.close();
    }
  });

  it('keeps one endpoint per peer and answers each at its own address', async () => {
    const socket = await boundSocket();
    const server = new CoapUdpServer({ socket, handler: async (r, peer) => ({ code: '2.05', payload: Buffer.from(`${peer.port}:${r.payload}`) }) });
    const clients = await Promise.all([0, 1].map(() => boundSocket()));
    try {
      const answers = await Promise.all(
        clients.map(
          (c, i) =>
            new Promise<string>((resolve) => {
              c.once('message', (m) => resolve(parse(m).payload.toString()));
              c.send(req({ code: 'POST', messageId: 1, payload: Buffer.from(`c${i}`) }), socket.address().port, '127.0.0.1');
            }),
        ),
      );
      expect(answers).toEqual(clients.map((c, i) => `${c.address().port}:c${i}`));
      expect(server.peerCount).toBe(2);
    } finally {
      server.close();
      socket.close();
      for (const c of clients) c.close();
    }
  });
});
