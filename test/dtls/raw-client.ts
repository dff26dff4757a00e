/** A raw UDP peer that speaks just enough DTLS framing to drive the server's first flights by hand. */
import dgram from 'node:dgram';
import { once } from 'node:events';
import { createHash, randomBytes } from 'node:crypto';
import { encodeClientHello, encodeClientKeyExchangePsk, parseServerHello } from '../../src/tls/messages.ts';
import type { ClientHello } from '../../src/tls/messages.ts';
import { extendedMasterSecret, keyExpansion, pskPreMasterSecret, splitKeyBlock, verifyData } from '../../src/tls/prf.ts';
import { cipherSuiteById, keyBlockLength } from '../../src/tls/suites/index.ts';
import { encodeFragment, parseHandshakeFragments, transcriptBytes } from '../../src/dtls/handshake.ts';
import type { HandshakeFragment } from '../../src/dtls/handshake.ts';
import { DTLS12, RecordLayer, encodeRecord, parseDatagram } from '../../src/dtls/record.ts';
import { IDENTITY, PSK_HEX } from './helpers.ts';
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
  async take(pred: (r: Received) => boolean, ms = 10_000): Promise<Received> {
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

/** What clientHello() offers first and the server picks: TLS_PSK_WITH_AES_128_GCM_SHA256. */
const HAND_SUITE = cipherSuiteById(0x00a8)!;

/**
 * A PSK handshake (GCM, extended_master_secret) driven by hand over a RawPeer, step by step, so a test can put
 * forged records between the steps, replay the cookie-bearing ClientHello, or resume by session id.
 */
export class HandClient {
  /** The client's record layer: epoch 1 keys are installed by flight5() or resumeFlight(). */
  readonly records = new RecordLayer();
  /** The datagram that carried the ClientHello with the cookie (what an attacker could replay). */
  ch2Datagram: Buffer = Buffer.alloc(0);
  sessionId: Buffer = Buffer.alloc(0);
  master: Buffer = Buffer.alloc(0);
  readonly #peer: RawPeer;
  readonly #ch: ClientHello;
  readonly #t = createHash('sha256');
  #serverRandom: Buffer = Buffer.alloc(0);
  #first: Received | undefined;

  /** `hello` changes the ClientHello clientHello() makes (a session id to resume, other extensions). */
  constructor(peer: RawPeer, hello: Partial<ClientHello> = {}) {
    this.#peer = peer;
    this.#ch = { ...clientHello(), ...hello };
    this.records.setInitialWriteSequence(2);
  }

  /** Cookie exchange, then the ClientHello with the cookie; resolves with the first datagram of the server's answer. */
  async hello(): Promise<Received> {
    const p = this.#peer;
    p.send(clientHelloDatagram(this.#ch, 0, 0));
    const hvr = await p.take((d) => d.fragments.some((f) => f.type === 3));
    const ch2 = { ...this.#ch, cookie: hvr.fragments.find((f) => f.type === 3)!.body.subarray(3) };
    this.ch2Datagram = clientHelloDatagram(ch2, 1, 1);
    p.send(this.ch2Datagram);
    this.#t.update(transcriptBytes({ type: 1, messageSeq: 1, body: encodeClientHello(ch2, { dtls: true }) }));
    const first = await p.take(() => true);
    this.#first = first;
    for (const f of first.fragments) this.#t.update(transcriptBytes(f));
    const shFragment = first.fragments.find((f) => f.type === 2);
    if (shFragment) {
      const sh = parseServerHello(shFragment.body);
      this.sessionId = sh.sessionId;
      this.#serverRandom = sh.random;
    }
    return first;
  }

  /** Whether the server answered hello() with an abbreviated handshake (flight 4b ends with an epoch-1 Finished). */
  get resumedByServer(): boolean {
    return this.#first?.records.some((r) => r.epoch === 1) ?? false;
  }

  /** Full handshake flight 5 as records: ClientKeyExchange and CCS in epoch 0, Finished in epoch 1. */
  flight5(psk = Buffer.from(PSK_HEX, 'hex'), identity = IDENTITY): Buffer[] {
    const cke = { type: 16, messageSeq: 2, body: encodeClientKeyExchangePsk(Buffer.from(identity)) };
    this.#t.update(transcriptBytes(cke));
    this.#installKeys(extendedMasterSecret(pskPreMasterSecret(psk), this.#t.copy().digest()));
    const fin = { type: 20, messageSeq: 3, body: verifyData(this.master, 'client', this.#t.copy().digest()) };
    this.#t.update(transcriptBytes(fin));
    return [this.records.seal(0, 22, transcriptBytes(cke)), this.records.seal(0, 20, Buffer.from([1])), this.records.seal(1, 22, transcriptBytes(fin))];
  }

  /** Abbreviated handshake: checks the server's Finished from flight 4b, returns our CCS and Finished records. */
  resumeFlight(master: Buffer): Buffer[] {
    this.#installKeys(master);
    const serverFinished = this.records.open(this.#first!.records.find((r) => r.epoch === 1)!);
    if (!Buffer.isBuffer(serverFinished)) throw new Error('server Finished did not open');
    const sf = parseHandshakeFragments(serverFinished)[0];
    if (!sf.body.equals(verifyData(master, 'server', this.#t.copy().digest()))) throw new Error('server Finished mismatch');
    this.#t.update(transcriptBytes(sf));
    const fin = { type: 20, messageSeq: 2, body: verifyData(master, 'client', this.#t.copy().digest()) };
    return [this.records.seal(0, 20, Buffer.from([1])), this.records.seal(1, 22, transcriptBytes(fin))];
  }

  /** Sends `text` as application data and resolves with the server's next application data, decrypted. */
  async exchange(text: string, ms = 5000): Promise<string> {
    this.#peer.send(this.records.seal(1, 23, Buffer.from(text)));
    const got = await this.#peer.take((d) => d.records.some((r) => r.type === 23 && r.epoch === 1), ms);
    const data = this.records.open(got.records.find((r) => r.type === 23)!);
    return Buffer.isBuffer(data) ? data.toString() : `<${data}>`;
  }

  #installKeys(master: Buffer): void {
    this.master = master;
    const k = splitKeyBlock(keyExpansion(master, this.#serverRandom, this.#ch.random, keyBlockLength(HAND_SUITE)), 0, 16, 4);
    this.records.installWriteEpoch(1, HAND_SUITE.createProtection(k.clientMacKey, k.clientKey, k.clientIv));
    this.records.installReadEpoch(1, HAND_SUITE.createProtection(k.serverMacKey, k.serverKey, k.serverIv));
  }
}
