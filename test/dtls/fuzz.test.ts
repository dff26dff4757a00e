/**
 * The DTLS server against generated datagrams (seeded fast-check): records with random content types, versions,
 * epochs, sequence numbers and length fields, truncated datagrams, ClientHellos with random suites, extensions and
 * cookies, and plain random bytes. The properties: the server never throws out of its socket handler, every answer
 * to a client that is not proven (no valid cookie, no session) is no larger than the datagram that caused it, the
 * state and the heap return to their level afterwards, and a real handshake still succeeds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import v8 from 'node:v8';
import vm from 'node:vm';
import fc from 'fast-check';
import { COOKIE_LENGTH } from '../../src/dtls/cookie.ts';
import { encodeFragment, parseHandshakeFragments } from '../../src/dtls/handshake.ts';
import { DTLS10, DTLS12, RECORD_HEADER_LENGTH, encodeRecord, parseDatagram } from '../../src/dtls/record.ts';
import { encodeClientHello } from '../../src/tls/messages.ts';
import type { ClientHello } from '../../src/tls/messages.ts';
import { RawPeer } from './raw-client.ts';
import { dtlsClient, startEchoServer, waitFor } from './helpers.ts';
import type { EchoServer } from './helpers.ts';

const SEED = 6347;
const STATELESS_RUNS = 3000;
const SESSION_RUNS = 400;

v8.setFlagsFromString('--expose_gc');
const gc = vm.runInNewContext('gc') as () => void;

let srv: EchoServer;
let stateless: RawPeer;
const proven: RawPeer[] = [];
let heapBefore = 0;
/** Uncaught exceptions while the fuzz runs (a throw out of the server's socket handler would land here). */
const uncaught: unknown[] = [];
const onUncaught = (err: unknown) => uncaught.push(err);

beforeAll(async () => {
  process.on('uncaughtException', onUncaught);
  // handshakes from the one fuzzing address come faster than the default per-address burst allows
  srv = await startEchoServer({ handshakeTimeoutMs: 1500, handshakeBurstPerAddress: 10_000 });
  stateless = await new RawPeer(srv.port).open('127.0.0.2');
  gc();
  heapBefore = process.memoryUsage().heapUsed;
});
afterAll(async () => {
  process.off('uncaughtException', onUncaught);
  stateless?.close();
  for (const p of proven) p.close();
  await srv?.server.close();
});

const bytes = (maxLength: number) => fc.uint8Array({ maxLength }).map((a) => Buffer.from(a));
const u16 = fc.integer({ min: 0, max: 0xffff });

const recordArb = fc.record({
  type: fc.oneof(fc.constantFrom(20, 21, 22, 23, 25), fc.integer({ min: 0, max: 255 })),
  version: fc.oneof(fc.constantFrom(DTLS12, DTLS10, 0x0303), u16),
  epoch: fc.oneof(fc.constantFrom(0, 1, 2), u16),
  seq: fc.oneof(fc.constantFrom(0, 1, 2 ** 48 - 1), fc.nat()),
  fragment: bytes(300),
  /** a length field other than the fragment's own, now and then */
  length: fc.option(u16, { freq: 4 }),
});

function encodeRaw(r: RecordInput): Buffer {
  const out = encodeRecord({ type: r.type, version: r.version, epoch: r.epoch, seq: r.seq, fragment: r.fragment });
  if (r.length !== null) out.writeUInt16BE(r.length, RECORD_HEADER_LENGTH - 2);
  return out;
}
interface RecordInput {
  type: number;
  version: number;
  epoch: number;
  seq: number;
  fragment: Buffer;
  length: number | null;
}

const clientHelloArb = fc.record({
  clientVersion: fc.oneof(fc.constant(DTLS12), u16),
  random: bytes(32).map((b) => Buffer.concat([b, Buffer.alloc(32 - b.length)])),
  sessionId: bytes(32),
  cookie: fc.oneof(
    bytes(COOKIE_LENGTH).map((b) => Buffer.concat([b, Buffer.alloc(COOKIE_LENGTH - b.length)])),
    bytes(64),
  ),
  cipherSuites: fc.array(fc.oneof(fc.constantFrom(0xc0a8, 0x00a8, 0x00ae, 0xc0ae, 0xc02b, 0x00ff), u16), { maxLength: 12 }),
  compressionMethods: fc.oneof(fc.constant(Buffer.from([0])), bytes(4)),
  extensions: fc.array(fc.record({ type: fc.oneof(fc.constantFrom(10, 11, 13, 23, 35, 54, 0xff01), u16), data: bytes(48) }), { maxLength: 6 }),
});

/** A ClientHello datagram; now and then its handshake header lies (offset, length) or its record is cut short. */
const clientHelloDatagramArb = fc
  .record({
    ch: clientHelloArb,
    messageSeq: fc.oneof(fc.constant(0), u16),
    offset: fc.option(u16, { freq: 4 }),
    length: fc.option(fc.nat(0xffffff), { freq: 4 }),
    seq: fc.nat(),
  })
  .map(({ ch, messageSeq, offset, length, seq }) => {
    const body = encodeClientHello(ch, { dtls: true });
    const fragment = encodeFragment(1, messageSeq, length ?? body.length, offset ?? 0, body);
    return encodeRecord({ type: 22, version: DTLS12, epoch: 0, seq, fragment });
  });

const datagramArb = fc
  .tuple(
    fc.oneof(
      bytes(1500),
      fc.array(recordArb, { minLength: 1, maxLength: 3 }).map((rs) => Buffer.concat(rs.map((r) => encodeRaw(r)))),
      clientHelloDatagramArb,
    ),
    fc.option(fc.nat(), { freq: 5 }),
  )
  .map(([d, cut]) => (cut === null || d.length === 0 ? d : d.subarray(0, cut % d.length)))
  .filter((d) => d.length > 0);

/** Sends `d` from `peer` and resolves once the server's socket handler has run for it. */
function deliver(peer: RawPeer, d: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('datagram not handled in time')), 20_000);
    // 'message' listeners run in order: this one after the server's handler for the same datagram
    srv.server.socket.once('message', () => {
      clearTimeout(timer);
      resolve();
    });
    peer.send(d);
  });
}

describe('DTLS fuzz', () => {
  it(`${STATELESS_RUNS} generated datagrams from an unproven client: each answered with no more bytes than it carried`, async () => {
    const amplified: Array<{ sent: number; answered: number }> = [];
    await fc.assert(
      fc.asyncProperty(datagramArb, async (d) => {
        const before = srv.sent.length;
        await deliver(stateless, d);
        const answered = srv.sent.slice(before).reduce((n, a) => n + a.length, 0);
        if (answered > d.length) amplified.push({ sent: d.length, answered });
        return answered <= d.length;
      }),
      { seed: SEED, numRuns: STATELESS_RUNS },
    );
    expect(amplified).toEqual([]);
    expect(uncaught).toEqual([]);
    expect(srv.server.handshakeCount + srv.server.sessionCount).toBe(0); // nothing kept for an unproven client
  }, 120_000);

  it(`${SESSION_RUNS} generated ClientHellos with a valid cookie, each followed by generated records, leave nothing behind`, async () => {
    let started = 0;
    await fc.assert(
      fc.asyncProperty(clientHelloArb, fc.array(recordArb, { minLength: 1, maxLength: 3 }), async (ch, records) => {
        // a port of its own: datagrams from a port whose handshake runs go to that handshake, not to the cookie check
        const peer = await new RawPeer(srv.port).open('127.0.0.3');
        proven.push(peer);
        const hello: ClientHello = { ...ch, cookie: Buffer.alloc(0) };
        const datagram = (c: ClientHello) =>
          encodeRecord({
            type: 22,
            version: DTLS12,
            epoch: 0,
            seq: 0,
            fragment: encodeFragment(1, 0, encodeClientHello(c, { dtls: true }).length, 0, encodeClientHello(c, { dtls: true })),
          });
        const before = srv.sent.length;
        await deliver(peer, datagram(hello));
        // the server answers synchronously: a HelloVerifyRequest for a ClientHello it could parse (if no larger)
        const hvr = srv.sent
          .slice(before)
          .flatMap((d) => parseDatagram(d))
          .flatMap((r) => (r.type === 22 ? parseHandshakeFragments(r.fragment) : []))
          .find((f) => f.type === 3);
        if (hvr) {
          await deliver(peer, datagram({ ...hello, cookie: hvr.body.subarray(3) }));
          started++;
        }
        await deliver(peer, Buffer.concat(records.map((r) => encodeRaw(r))));
        proven.splice(proven.indexOf(peer), 1);
        peer.close();
        return true;
      }),
      { seed: SEED + 1, numRuns: SESSION_RUNS },
    );
    expect(started).toBeGreaterThan(SESSION_RUNS / 10); // the generated ClientHellos did reach the handshake
    expect(uncaught).toEqual([]);
    await waitFor(() => srv.server.handshakeCount + srv.server.sessionCount === 0, 20_000); // abandoned ones time out
  }, 120_000);

  it('afterwards a real handshake succeeds and the heap is back near its level', async () => {
    const res = await dtlsClient({ port: srv.port, cipher: 'PSK-AES128-CCM8:@SECLEVEL=0', line: 'after the fuzz', closeNotify: true, timeoutMs: 15_000 });
    expect(res.echoed).toBe(true);
    await waitFor(() => srv.server.sessionCount === 0, 10_000);
    srv.sent.length = 0; // the recording helper's own memory, not the server's
    srv.received.length = 0;
    stateless.received.length = 0;
    gc();
    const grownMb = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
    expect(grownMb).toBeLessThan(16);
  }, 60_000);
});
