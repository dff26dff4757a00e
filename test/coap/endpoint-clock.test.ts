/**
 * The CoAP endpoint's timers on a manual clock: the RFC 7252 defaults (ACK_TIMEOUT 2 s, EXCHANGE_LIFETIME 247 s,
 * BLOCKWISE_STATUS_LIFETIME 93 s) driven in microseconds of test time, each deadline passed exactly.
 */
import { generate, parse } from 'coap-packet';
import type { Packet } from 'coap-packet';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/app/clock.ts';
import { encodeBlock } from '../../src/coap/block.ts';
import { CoapEndpoint, COAP_DEFAULTS } from '../../src/coap/index.ts';
import type { CoapEndpointOptions, CoapResponse } from '../../src/coap/index.ts';

function harness(config: Partial<CoapEndpointOptions> = {}) {
  const clock = new ManualClock(1_000_000);
  const sent: Buffer[] = [];
  const releases: ((r: CoapResponse) => void)[] = [];
  const gaveUp: number[] = [];
  const endpoint = new CoapEndpoint({
    ackRandomFactor: 1,
    ...config,
    clock,
    send: (d) => sent.push(d),
    handler: () => new Promise((resolve) => releases.push(resolve)),
  });
  endpoint.on('giveUp', (id: number) => gaveUp.push(id));
  return { clock, sent, releases, gaveUp, endpoint, parsed: () => sent.map((d) => parse(d)) };
}
const req = (p: Packet) => generate({ confirmable: true, token: Buffer.from('t0k3'), ...p });

describe('CoAP endpoint on a manual clock', () => {
  it('the empty ACK goes at the piggyback window, the separate response is retransmitted at ACK_TIMEOUT doubling, then given up', async () => {
    const h = harness();
    h.endpoint.receive(req({ code: 'POST', messageId: 5, payload: Buffer.from('slow') }));
    h.clock.advance(COAP_DEFAULTS.piggybackMs - 1);
    expect(h.sent).toHaveLength(0);
    h.clock.advance(1);
    expect(h.parsed()).toMatchObject([{ ack: true, code: '0.00', messageId: 5 }]);
    h.releases[0]({ code: '2.05', payload: Buffer.from('late') });
    await expect.poll(() => h.sent.length).toBe(2);
    const separate = h.parsed()[1];
    expect(separate).toMatchObject({ confirmable: true, code: '2.05' });
    // 2 s, 4 s, 8 s, 16 s: MAX_RETRANSMIT 4 retransmissions, each exactly at its time and not a millisecond before
    let wait = COAP_DEFAULTS.ackTimeoutMs;
    for (let n = 1; n <= COAP_DEFAULTS.maxRetransmit; n++, wait *= 2) {
      h.clock.advance(wait - 1);
      expect(h.sent).toHaveLength(1 + n);
      h.clock.advance(1);
      expect(h.sent).toHaveLength(2 + n);
      expect(h.sent[1 + n].equals(h.sent[1])).toBe(true);
    }
    expect(h.gaveUp).toEqual([]);
    h.clock.advance(wait);
    expect(h.gaveUp).toEqual([separate.messageId]);
    expect(h.endpoint.pending).toBe(0);
    expect(h.clock.pending).toBe(0);
  });

  it('an ACKed separate response is never retransmitted: no timer is left to fire', async () => {
    const h = harness();
    h.endpoint.receive(req({ code: 'POST', messageId: 6, payload: Buffer.from('slow') }));
    h.clock.advance(COAP_DEFAULTS.piggybackMs);
    h.releases[0]({ code: '2.05' });
    await expect.poll(() => h.sent.length).toBe(2);
    const id = h.parsed()[1].messageId;
    h.endpoint.receive(generate({ ack: true, messageId: id, code: '0.00' }));
    expect(h.clock.pending).toBe(0);
    h.clock.advance(60 * COAP_DEFAULTS.ackTimeoutMs);
    expect(h.sent).toHaveLength(2);
  });

  it('a message id is remembered for EXCHANGE_LIFETIME: a duplicate before it gets the stored reply, after it runs the handler again', async () => {
    const h = harness();
    const datagram = req({ code: 'POST', messageId: 9, payload: Buffer.from('x') });
    h.endpoint.receive(datagram);
    h.releases[0]({ code: '2.04' });
    await expect.poll(() => h.sent.length).toBe(1);
    h.clock.advance(COAP_DEFAULTS.exchangeLifetimeMs - 1);
    h.endpoint.receive(datagram);
    expect(h.sent).toHaveLength(2);
    expect(h.sent[1].equals(h.sent[0])).toBe(true);
    expect(h.releases).toHaveLength(1);
    h.clock.advance(1);
    expect(h.endpoint.remembers(9)).toBe(false);
    h.endpoint.receive(datagram);
    expect(h.releases).toHaveLength(2);
  });

  it('an abandoned Block1 upload is dropped BLOCKWISE_STATUS_LIFETIME after its last block, not before', () => {
    const h = harness();
    const block = (num: number, messageId: number) =>
      req({
        code: 'POST',
        messageId,
        options: [{ name: 'Block1', value: encodeBlock({ num, more: true, szx: 2 }) }],
        payload: Buffer.alloc(64, num),
      });
    h.endpoint.receive(block(0, 20));
    h.clock.advance(COAP_DEFAULTS.blockwiseStatusLifetimeMs - 1);
    h.endpoint.receive(block(1, 21)); // the upload is still there, and its lifetime starts again
    expect(h.parsed().map((p) => p.code)).toEqual(['2.31', '2.31']);
    h.clock.advance(COAP_DEFAULTS.blockwiseStatusLifetimeMs - 1);
    expect(h.endpoint.settled).toBe(false);
    h.clock.advance(1);
    h.endpoint.receive(block(2, 22)); // its upload is gone: the block does not follow anything
    expect(h.parsed()[2].code).toBe('4.08');
  });
});
