// The handshake flood of the bench's flood row (bench/flood.ts), run as its own process:
//   node bench/dtls-flood.ts <port> <seconds> <cookieless-per-second> <address>...   (ends early when stdin closes)
// From each loopback address: ClientHellos without a cookie at <cookieless-per-second> in total (the server answers
// each statelessly with a HelloVerifyRequest), and handshakes that pass the cookie check and then stall after the
// server's flight 4, each from a fresh port (a port whose handshake runs would be routed to it), as many as the
// server admits. Prints "flooding" once under way, then one JSON line of counts when done.
import dgram from 'node:dgram';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { encodeFragment, parseHandshakeFragments } from '../src/dtls/handshake.ts';
import { DTLS12, encodeRecord, parseDatagram } from '../src/dtls/record.ts';
import { encodeClientHello } from '../src/tls/messages.ts';
import type { ClientHello } from '../src/tls/messages.ts';

const [port, seconds, perSecond, ...addresses] = process.argv.slice(2);
let end = Date.now() + Number(seconds) * 1000;
// the bench ends the flood early by closing this process's stdin
process.stdin.on('data', () => undefined).on('end', () => (end = 0));
/** Stalling handshakes each address keeps under way at once. */
const STALLERS_PER_ADDRESS = 8;
const counts = { cookieless: 0, helloVerifyRequests: 0, withCookie: 0, serverHellos: 0 };

function hello(cookie = Buffer.alloc(0)): ClientHello {
  return {
    clientVersion: DTLS12,
    random: randomBytes(32),
    sessionId: Buffer.alloc(0),
    cookie,
    cipherSuites: [0xc0a8, 0x00a8],
    compressionMethods: Buffer.from([0]),
    extensions: [{ type: 23, data: Buffer.alloc(0) }],
  };
}
function datagram(ch: ClientHello, seq: number): Buffer {
  const body = encodeClientHello(ch, { dtls: true });
  return encodeRecord({ type: 22, version: DTLS12, epoch: 0, seq, fragment: encodeFragment(1, seq, body.length, 0, body) });
}
function handshakeTypes(d: Buffer): Array<{ type: number; body: Buffer }> {
  try {
    return parseDatagram(d)
      .filter((r) => r.type === 22 && r.epoch === 0)
      .flatMap((r) => parseHandshakeFragments(r.fragment));
  } catch {
    return [];
  }
}

/** ClientHellos without a cookie from one socket per address, paced in 10 ms ticks. */
async function cookieless(address: string): Promise<void> {
  const socket = dgram.createSocket('udp4');
  socket.on('message', () => counts.helloVerifyRequests++);
  socket.bind(0, address);
  await once(socket, 'listening');
  const perTick = Math.max(1, Math.round(Number(perSecond) / addresses.length / 100));
  const d = datagram(hello(), 0);
  while (Date.now() < end) {
    for (let i = 0; i < perTick; i++) socket.send(d, Number(port), '127.0.0.1');
    counts.cookieless += perTick;
    await new Promise((r) => setTimeout(r, 10));
  }
  socket.close();
}

/** One stalled handshake after another: cookie exchange, ClientHello with the cookie, then silence. */
async function staller(address: string): Promise<void> {
  while (Date.now() < end) {
    const socket = dgram.createSocket('udp4');
    socket.bind(0, address);
    await once(socket, 'listening');
    const answer = (type: number) =>
      new Promise<Buffer | null>((resolve) => {
        const timer = setTimeout(() => resolve(null), 500);
        socket.on('message', (d) => {
          const m = handshakeTypes(d).find((f) => f.type === type);
          if (m) {
            clearTimeout(timer);
            resolve(m.body);
          }
        });
      });
    const ch = hello();
    const hvr = answer(3);
    socket.send(datagram(ch, 0), Number(port), '127.0.0.1');
    const body = await hvr;
    if (body) {
      counts.helloVerifyRequests++;
      const sh = answer(2);
      socket.send(datagram({ ...ch, cookie: body.subarray(3) }, 1), Number(port), '127.0.0.1');
      counts.withCookie++;
      if (await sh) counts.serverHellos++;
    }
    socket.close();
  }
}

const work = addresses.flatMap((a) => [cookieless(a), ...Array.from({ length: STALLERS_PER_ADDRESS }, () => staller(a))]);
console.log('flooding');
await Promise.all(work);
console.log(JSON.stringify(counts));
