/**
 * A test-only DTLS 1.2 client for TLS_PSK_WITH_AES_128_CCM_8 (or TLS_PSK_WITH_AES_128_CBC_SHA256) with a Connection
 * ID (RFC 9146), written from RFC 5246, RFC 6347, RFC 6655, RFC 5487 and RFC 9146 on node:crypto and node:dgram alone. It imports NOTHING from src/ (see
 * crypto.ts): no peer installable here speaks RFC 9146, so this independent client is the other side of the proof.
 *
 * Deliberately small: one suite, extended_master_secret, no fragmentation of its own messages, no retransmission
 * (tests run on loopback), and unfragmented server handshake messages expected. `rebind()` moves it to a new UDP
 * source port, as a NAT rebinding would.
 */
import dgram from 'node:dgram';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { keyBlock, openCidRecord, openCidRecordCbc, prf, pskPremaster, sealCidRecord, sealCidRecordCbc } from './crypto.ts';
import type { Keys } from './crypto.ts';

const HANDSHAKE = 22;
const CCS = 20;
const APPLICATION_DATA = 23;
const TLS12_CID = 25;
const CLIENT_HELLO = 1;
const SERVER_HELLO = 2;
const HELLO_VERIFY_REQUEST = 3;
const SERVER_HELLO_DONE = 14;
const CLIENT_KEY_EXCHANGE = 16;
const FINISHED = 20;
const EXT_EMS = 23;
const EXT_CONNECTION_ID = 54;
const PSK_AES_128_CCM_8 = 0xc0a8;
const PSK_AES_128_CBC_SHA256 = 0x00ae;

interface Rec {
  type: number;
  epoch: number;
  seq: number;
  cid?: Buffer;
  body: Buffer;
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

function plainRecord(type: number, epoch: number, seq: number, body: Buffer): Buffer {
  const h = Buffer.alloc(13);
  h[0] = type;
  h.writeUInt16BE(0xfefd, 1);
  h.writeUInt16BE(epoch, 3);
  h.writeUIntBE(seq, 5, 6);
  h.writeUInt16BE(body.length, 11);
  return Buffer.concat([h, body]);
}

/** A whole (unfragmented) DTLS handshake message: the form that is both sent and hashed into the transcript. */
function handshakeMessage(type: number, messageSeq: number, body: Buffer): Buffer {
  const h = Buffer.alloc(12);
  h[0] = type;
  h.writeUIntBE(body.length, 1, 3);
  h.writeUInt16BE(messageSeq, 4);
  h.writeUIntBE(0, 6, 3);
  h.writeUIntBE(body.length, 9, 3);
  return Buffer.concat([h, body]);
}

export interface CidClientOptions {
  identity: string;
  psk: Buffer;
  /** The CID the server must put in the records it sends us (RFC 9146 allows empty). Default: 4 random bytes. */
  clientCid?: Buffer;
  /** Default 'ccm8'. */
  suite?: 'ccm8' | 'cbc';
  /** The server's address (default 127.0.0.1, the client then bound on loopback; otherwise on every address). */
  host?: string;
}

export class CidClient {
  socket!: dgram.Socket;
  /** The CID the server issued (what we put in our records). */
  serverCid: Buffer = Buffer.alloc(0);
  readonly clientCid: Buffer;
  /** Application data received, with the local port it arrived on. */
  readonly received: Array<{ data: Buffer; localPort: number }> = [];

  #port: number;
  readonly #o: CidClientOptions;
  readonly #inbox: Rec[] = [];
  #keys!: Keys;
  #epoch0Seq = 0;
  #epoch1Seq = 0;

  constructor(serverPort: number, o: CidClientOptions) {
    this.#port = serverPort;
    this.#o = o;
    this.clientCid = o.clientCid ?? randomBytes(4);
  }

  get localPort(): number {
    return this.socket.address().port;
  }

  async #bind(): Promise<void> {
    const s = dgram.createSocket('udp4');
    s.on('message', (d) => this.#onDatagram(d, s));
    await new Promise<void>((resolve) => (this.#o.host && this.#o.host !== '127.0.0.1' ? s.bind(0, resolve) : s.bind(0, '127.0.0.1', resolve)));
    this.socket = s;
  }

  #onDatagram(d: Buffer, s: dgram.Socket): void {
    let o = 0;
    while (d.length - o >= 13) {
      const type = d[o];
      const cidLen = type === TLS12_CID ? this.clientCid.length : 0;
      const len = d.readUInt16BE(o + 11 + cidLen);
      const r: Rec = { type, epoch: d.readUInt16BE(o + 3), seq: d.readUIntBE(o + 5, 6), body: d.subarray(o + 13 + cidLen, o + 13 + cidLen + len) };
      if (cidLen) r.cid = d.subarray(o + 11, o + 11 + cidLen);
      o += 13 + cidLen + len;
      if (r.type === TLS12_CID && this.#keys) {
        const k = this.#keys;
        const inner = this.#cbc
          ? openCidRecordCbc(k.serverMac, k.serverKey, r.epoch, r.seq, r.cid!, r.body)
          : openCidRecord(k.serverKey, k.serverIv, r.epoch, r.seq, r.cid!, r.body);
        if (!inner) continue;
        if (inner.type === APPLICATION_DATA) {
          this.received.push({ data: inner.content, localPort: s.address().port });
          continue;
        }
        r.type = inner.type;
        r.body = inner.content;
      }
      this.#inbox.push(r);
    }
  }

  async #take(pred: (r: Rec) => boolean, ms = 3000): Promise<Rec> {
    const end = Date.now() + ms;
    for (;;) {
      const i = this.#inbox.findIndex(pred);
      if (i >= 0) return this.#inbox.splice(i, 1)[0];
      if (Date.now() > end) throw new Error('cid-client: expected record not received');
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  get #cbc(): boolean {
    return this.#o.suite === 'cbc';
  }

  #seal(seq: number, type: number, content: Buffer, padding = 0): Buffer {
    const k = this.#keys;
    return this.#cbc
      ? sealCidRecordCbc(k.clientMac, k.clientKey, 1, seq, this.serverCid, type, content, padding)
      : sealCidRecord(k.clientKey, k.clientIv, 1, seq, this.serverCid, type, content, padding);
  }

  #send(...records: Buffer[]): void {
    this.socket.send(Buffer.concat(records), this.#port, this.#o.host ?? '127.0.0.1');
  }

  get #suiteId(): number {
    return this.#cbc ? PSK_AES_128_CBC_SHA256 : PSK_AES_128_CCM_8;
  }

  #clientHello(random: Buffer, cookie: Buffer): Buffer {
    const exts = Buffer.concat([
      u16(EXT_EMS),
      u16(0),
      u16(EXT_CONNECTION_ID),
      u16(1 + this.clientCid.length),
      Buffer.from([this.clientCid.length]),
      this.clientCid,
    ]);
    return Buffer.concat([
      u16(0xfefd),
      random,
      Buffer.from([0]),
      Buffer.from([cookie.length]),
      cookie,
      u16(2),
      u16(this.#suiteId),
      Buffer.from([1, 0]),
      u16(exts.length),
      exts,
    ]);
  }

  /** Full PSK handshake with cookie exchange; afterwards both directions use tls12_cid records. */
  async connect(): Promise<void> {
    await this.#bind();
    const clientRandom = randomBytes(32);
    this.#send(plainRecord(HANDSHAKE, 0, this.#epoch0Seq++, handshakeMessage(CLIENT_HELLO, 0, this.#clientHello(clientRandom, Buffer.alloc(0)))));
    const hvr = await this.#take((r) => r.type === HANDSHAKE && r.body[0] === HELLO_VERIFY_REQUEST);
    const cookie = hvr.body.subarray(12 + 3, 12 + 3 + hvr.body[12 + 2]);

    const transcript = createHash('sha256');
    const ch = handshakeMessage(CLIENT_HELLO, 1, this.#clientHello(clientRandom, cookie));
    transcript.update(ch);
    this.#send(plainRecord(HANDSHAKE, 0, this.#epoch0Seq++, ch));

    const sh = await this.#take((r) => r.type === HANDSHAKE && r.body[0] === SERVER_HELLO);
    const shBody = sh.body.subarray(12);
    if (sh.body.readUIntBE(9, 3) !== sh.body.readUIntBE(1, 3)) throw new Error('cid-client: fragmented ServerHello');
    transcript.update(sh.body);
    const serverRandom = shBody.subarray(2, 34);
    let o = 34;
    o += 1 + shBody[o]; // session_id
    if (shBody.readUInt16BE(o) !== this.#suiteId) throw new Error('cid-client: server chose another suite');
    o += 3; // suite + compression
    const extEnd = o + 2 + shBody.readUInt16BE(o);
    let ems = false;
    for (o += 2; o < extEnd;) {
      const type = shBody.readUInt16BE(o);
      const len = shBody.readUInt16BE(o + 2);
      const data = shBody.subarray(o + 4, o + 4 + len);
      if (type === EXT_EMS) ems = true;
      if (type === EXT_CONNECTION_ID) this.serverCid = Buffer.from(data.subarray(1, 1 + data[0]));
      o += 4 + len;
    }
    if (!ems) throw new Error('cid-client: server did not accept extended_master_secret');
    if (this.serverCid.length === 0) throw new Error('cid-client: server issued no connection id');
    const shd = await this.#take((r) => r.type === HANDSHAKE && r.body[0] === SERVER_HELLO_DONE);
    transcript.update(shd.body);

    const identity = Buffer.from(this.#o.identity);
    const cke = handshakeMessage(CLIENT_KEY_EXCHANGE, 2, Buffer.concat([u16(identity.length), identity]));
    transcript.update(cke);
    const master = prf(pskPremaster(this.#o.psk), 'extended master secret', transcript.copy().digest(), 48);
    this.#keys = keyBlock(master, serverRandom, clientRandom, this.#cbc);
    const fin = handshakeMessage(FINISHED, 3, prf(master, 'client finished', transcript.copy().digest(), 12));
    transcript.update(fin);
    this.#send(
      plainRecord(HANDSHAKE, 0, this.#epoch0Seq++, cke),
      plainRecord(CCS, 0, this.#epoch0Seq++, Buffer.from([1])),
      this.#seal(this.#epoch1Seq++, HANDSHAKE, fin),
    );
    await this.#take((r) => r.type === CCS);
    const sfin = await this.#take((r) => r.type === HANDSHAKE && r.epoch === 1 && r.body[0] === FINISHED);
    const expected = prf(master, 'server finished', transcript.digest(), 12);
    if (!timingSafeEqual(sfin.body.subarray(12), expected)) throw new Error('cid-client: server Finished mismatch');
  }

  /** Sends application data in a tls12_cid record (optionally with zero padding inside the encryption). */
  send(data: Buffer | string, padding = 0): void {
    this.#send(this.#seal(this.#epoch1Seq++, APPLICATION_DATA, Buffer.from(data), padding));
  }

  /** A record as `send` would build it, without sending (for replay tests). */
  sealApplicationData(data: Buffer | string, seq: number): Buffer {
    return this.#seal(seq, APPLICATION_DATA, Buffer.from(data));
  }

  /** Raw datagram out of the current socket. */
  sendRaw(d: Buffer): void {
    this.#send(d);
  }

  /** Moves to a new UDP source port (closing the old socket), as a NAT rebinding does. */
  async rebind(): Promise<void> {
    const old = this.socket;
    await this.#bind();
    old.close();
  }

  /** Moves to a new UDP source port and sends to `port` from now on (another node of a cluster, as a balancer would). */
  async moveTo(port: number): Promise<void> {
    await this.rebind();
    this.#port = port;
  }

  async waitForData(pred: (s: string) => boolean, ms = 3000): Promise<{ data: Buffer; localPort: number }> {
    const end = Date.now() + ms;
    for (;;) {
      const hit = this.received.find((r) => pred(r.data.toString()));
      if (hit) return hit;
      if (Date.now() > end) throw new Error('cid-client: expected data not received');
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  close(): void {
    this.socket?.close();
  }
}
