// Property-based fuzzing of a CoAP port with fast-check: valid-ish messages (any type, code, token length, options
// of known and random numbers with every delta/length encoding, payloads), the same cut short, and random bytes.
// Each datagram is followed by a CoAP ping from the same socket: the server handles one peer's datagrams in order,
// so whatever arrives before the ping's Reset answers the datagram (used by test/coap/fuzz.test.ts).
import dgram from 'node:dgram';
import v8 from 'node:v8';
import vm from 'node:vm';
import fc from 'fast-check';

/** An option as it goes on the wire: its number and value. */
type WireOption = [number, Uint8Array];

/** Option numbers worth hitting: every one the server knows, the reserved and unknown critical ones, and extremes. */
const NUMBERS = [1, 3, 4, 5, 6, 7, 8, 9, 11, 12, 14, 15, 17, 20, 23, 27, 28, 35, 39, 41, 60, 128, 258, 269, 270, 1000, 2049, 65000, 65535];

const value = fc.oneof(
  fc.uint8Array({ maxLength: 4 }),
  fc.constantFrom('psk-identity=nobody', 'report', '', 'a'.repeat(300)).map((s) => new Uint8Array(Buffer.from(s))),
  fc.uint8Array({ minLength: 12, maxLength: 300 }),
);
const wireOption: fc.Arbitrary<WireOption> = fc.tuple(fc.oneof(fc.constantFrom(...NUMBERS), fc.integer({ min: 0, max: 65535 })), value);

/** Options in wire form: sorted, delta-encoded, with the 13/14 extended deltas and lengths. */
export function encodeOptions(options: WireOption[]): Buffer {
  const parts: Buffer[] = [];
  let previous = 0;
  for (const [number, v] of [...options].sort((a, b) => a[0] - b[0])) {
    const delta = number - previous;
    previous = number;
    const nibble = (n: number) => (n < 13 ? [n, []] : n < 269 ? [13, [n - 13]] : [14, [(n - 269) >> 8, (n - 269) & 0xff]]) as [number, number[]];
    const [d, dExt] = nibble(delta);
    const [l, lExt] = nibble(v.length);
    parts.push(Buffer.from([(d << 4) | l, ...dExt, ...lExt]), Buffer.from(v));
  }
  return Buffer.concat(parts);
}

const header = fc.record({
  type: fc.integer({ min: 0, max: 3 }),
  tkl: fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 0, max: 8 }) }, { weight: 1, arbitrary: fc.integer({ min: 9, max: 15 }) }),
  code: fc.oneof(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 0, max: 255 })),
  messageId: fc.integer({ min: 0, max: 0xffff }),
});

/** A message that mostly follows RFC 7252's framing. */
const validish: fc.Arbitrary<Buffer> = fc
  .record({
    header,
    token: fc.uint8Array({ minLength: 8, maxLength: 8 }),
    options: fc.oneof(
      { weight: 12, arbitrary: fc.array(wireOption, { maxLength: 12 }) },
      {
        weight: 1,
        arbitrary: fc.integer({ min: 100, max: 3000 }).map((n) => Array.from({ length: n }, (_, i): WireOption => [41 + 2 * i, new Uint8Array(0)])),
      },
    ),
    payload: fc.oneof(fc.constant(null), fc.uint8Array({ maxLength: 1200 })),
    reserved: fc.oneof({ weight: 15, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  })
  .map(({ header: h, token, options, payload, reserved }) =>
    Buffer.concat([
      Buffer.from([0x40 | (h.type << 4) | h.tkl, h.code, h.messageId >> 8, h.messageId & 0xff]),
      Buffer.from(token.subarray(0, Math.min(h.tkl, 8))),
      encodeOptions(options),
      reserved ? Buffer.from([0xf1, 0]) : Buffer.alloc(0),
      payload === null ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0xff]), Buffer.from(payload)]),
    ]),
  );

/** Valid-ish messages, the same cut at any point, and plain random bytes. */
export const coapDatagram: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 5, arbitrary: validish },
  { weight: 2, arbitrary: fc.tuple(validish, fc.nat()).map(([d, n]) => d.subarray(0, n % (d.length + 1))) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 1500 }).map((a) => Buffer.from(a)) },
);

export interface CoapFuzzOutcome {
  datagrams: number;
  answered: number;
  /** answers larger than their trigger (at most 20 kept) */
  amplified: { trigger: string; answer: string }[];
}

/**
 * Sends `numRuns` generated datagrams with `seed` to 127.0.0.1:`port` from `sockets` sockets (in turn), each followed
 * by a ping; every answer before the ping's Reset is checked against its trigger's size.
 */
export async function fuzzCoapPort(port: number, options: { seed: number; numRuns: number; sockets: number }): Promise<CoapFuzzOutcome> {
  const outcome: CoapFuzzOutcome = { datagrams: 0, answered: 0, amplified: [] };
  const sockets = await Promise.all(
    Array.from({ length: options.sockets }, async () => {
      const s = dgram.createSocket('udp4');
      await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
      return s;
    }),
  );
  let turn = 0;
  // pings sent more than once: a second Reset may still come, and is no answer to the next datagram
  const resent = new Set<number>();
  try {
    await fc.assert(
      fc.asyncProperty(coapDatagram, async (datagram) => {
        const socket = sockets[turn++ % sockets.length];
        const pingId = datagram.length >= 4 ? (datagram.readUInt16BE(2) + 1) & 0xffff : 0;
        const answers = await new Promise<Buffer[]>((resolve, reject) => {
          const got: Buffer[] = [];
          const ping = Buffer.from([0x40, 0, pingId >> 8, pingId & 0xff]);
          // sent again every second: loopback UDP rarely drops, but a lost ping must not fail the run
          const again = setInterval(() => {
            resent.add(pingId);
            socket.send(ping, port, '127.0.0.1');
          }, 1000);
          const timer = setTimeout(() => {
            done();
            reject(new Error(`no Reset to the ping after ${datagram.toString('hex').slice(0, 200)}`));
          }, 10_000);
          const done = () => {
            clearInterval(again);
            clearTimeout(timer);
            socket.off('message', onMessage);
          };
          const onMessage = (m: Buffer) => {
            const reset = m.length === 4 && m[0] === 0x70 && m[1] === 0;
            if (reset && m.readUInt16BE(2) === pingId) {
              done();
              resolve(got);
            } else if (!(reset && resent.has(m.readUInt16BE(2)))) {
              got.push(m);
            }
          };
          socket.on('message', onMessage);
          socket.send(datagram, port, '127.0.0.1');
          socket.send(ping, port, '127.0.0.1');
        });
        outcome.datagrams++;
        if (answers.length > 0) outcome.answered++;
        for (const a of answers) {
          if (a.length > datagram.length && outcome.amplified.length < 20)
            outcome.amplified.push({ trigger: datagram.toString('hex').slice(0, 400), answer: a.toString('hex').slice(0, 400) });
        }
        return true;
      }),
      { seed: options.seed, numRuns: options.numRuns, endOnFailure: true },
    );
  } finally {
    for (const s of sockets) s.close();
  }
  return outcome;
}

/** A full garbage collection: `global.gc` when node runs with --expose-gc, else V8's own made reachable for this process. */
export function collectGarbage(): void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed();
  v8.setFlagsFromString('--expose-gc');
  (vm.runInNewContext('gc') as () => void)();
}
