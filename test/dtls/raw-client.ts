/** A raw UDP peer that speaks just enough DTLS framing to drive the server's first flights by hand. */
import dgram from 'node:dgram';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { encodeClientHello } from '../../src/tls/messages.ts';
import type { ClientHello } from '../../src/tls/messages.ts';
import { encodeFragment, parseHandshakeFragments } from '../../src/dtls/handshake.ts';
import type { HandshakeFragment } from '../../src/dtls/handshake.ts';
import { DTLS12, encodeRecord, parseDatagram } from '../../src/dtls/record.ts';
import type { DtlsRecord } from '../../src/dtls/record.ts';

export function clientHello(cookie?: Buffer): ClientHello {
  return {
    clientVersion: DTLS12,
    random: randomBytes(32),
    sessionId: Buffer.alloc(0),
    cookie: cookie ?? Buffer.alloc(0),
    cipherSuites: [0x00a8, 0x00ff],
    compressionMethods: Buffer.from([0]),
    extensions: [{ type: 23, data: Buffer.alloc(0) }],
  };
}

export function clientHelloDatagram(ch: ClientHello, messageSeq: number, recordSeq: number): Buffer {
  const body = encodeClientHello(ch, { dtls: true });
  return encodeRecord({ type: 22, version: DTLS12, epoch: 0, seq: recordSeq, fragment: encodeFragment(1, messageSeq, body.length, 0, body) });
}

export interface Received {
  datagram: Buffer;
  records: DtlsRecord[];
  fragments: HandshakeFragment[];
}

export class RawPeer {
  readonly socket = dgram.createSocket('udp4');
  readonly received: Received[] = [];
  readonly #port: number;

  constructor(port: number) {
    this.#port = port;
    this.socket.on('message', (d) => {
      const records = parseDatagram(d);
      const fragments = records.filter((r) => r.type === 22 && r.epoch === 0).flatMap((r) => parseHandshakeFragments(r.fragment));
      this.received.push({ datagram: d, records, fragments });
    });
  }

  /** Binds to `address` (any 127.x.y.z works on Linux loopback: a second "source address" for limit tests). */
  async open(address = '127.0.0.1'): Promise<this> {
    this.socket.bind(0, address);
    await once(this.socket, 'listening');
    return this;
  }

  /** Waits for the first received datagram matching `pred`, removing it and everything before it. */
  async take(pred: (r: Received) => boolean, ms = 5000): Promise<Received> {
    const end = Date.now() + ms;
    for (;;) {
      const i = this.received.findIndex(pred);
      if (i >= 0) return this.received.splice(0, i + 1)[i];
      if (Date.now() > end) throw new Error('expected datagram not received in time');
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  send(d: Buffer): void {
    this.socket.send(d, this.#port, '127.0.0.1');
  }

  close(): void {
    this.socket.close();
  }
}
