/**
 * TLS 1.2 PSK server (RFC 5246 + RFC 4279 plain PSK, RFC 7627 EMS, RFC 5746 renegotiation_info) on node:crypto.
 *
 * One PskTlsConnection per TCP connection. The handshake state machine is in `#onHandshakeMessage`:
 *
 *   client_hello ──ClientHello──▶ (send ServerHello + ServerHelloDone) client_key_exchange
 *   client_key_exchange ──ClientKeyExchange(psk_identity)──▶ psk_lookup   (records buffered, async lookupPsk)
 *   psk_lookup ──keys derived (from a random key when the identity is unknown)──▶ change_cipher_spec
 *   change_cipher_spec ──ChangeCipherSpec──▶ finished                      (client→server protection on)
 *   finished ──Finished ok──▶ (send CCS + Finished) established             (emit 'secureConnection')
 *   established: application_data both ways; ClientHello → warning no_renegotiation; close_notify → close.
 *
 * Before the client is authenticated it costs little and learns nothing: a handshake message announced larger than
 * 16 KiB is refused at its header (record.ts), reassembly is linear in the bytes sent, nothing is read while the PSK
 * lookup runs, an identity over MAX_PSK_IDENTITY_BYTES is never looked up, and an unknown identity fails exactly as a
 * wrong key does (bad_record_mac at the client's Finished). Per-address connection limits are the listener's
 * (gateway/https.ts).
 */
import net from 'node:net';
import { Duplex } from 'node:stream';
import { createHash, createSecretKey } from 'node:crypto';
import type { Hash, KeyObject } from 'node:crypto';
import { AlertDescription, AlertLevel, TlsAlert, TlsPeerAlert } from './alert.ts';
import {
  ExtensionType,
  HandshakeType,
  checkClientHelloOffer,
  encodeHandshake,
  expectType,
  encodeServerHello,
  encodeServerHelloDone,
  findExtension,
  parseClientHello,
} from './messages.ts';
import type { ClientHello, Extension } from './messages.ts';
import { keyExpansion, splitKeyBlock } from './prf.ts';
import { MAX_PSK_IDENTITY_BYTES, lookupPskSafely } from './psk.ts';
import { checkClientFinished, chooseSuite, pskMasterSecret, pskOrStandIn, readPskIdentity, serverFinishedData } from './psk-handshake.ts';
import { publicRandomBytes } from './random.ts';
import {
  ContentType,
  HandshakeReassembler,
  MAX_CIPHERTEXT_LENGTH,
  MAX_PLAINTEXT_LENGTH,
  RECORD_HEADER_LENGTH,
  RecordReader,
  encodePlaintextRecord,
  writeRecordHeader,
} from './record.ts';
import type { HandshakeMessage } from './record.ts';
import { CIPHER_SUITES, cipherSuiteByName, keyBlockLength } from './suites/index.ts';
import type { CipherSuite, RecordProtection } from './suites/index.ts';

export const TLS12 = 0x0303;

export interface PskTlsServerOptions {
  lookupPsk(identity: string): Promise<Buffer | null>;
  /** IANA names, in server preference order; default all three (CCM_8, GCM, CBC-SHA256). */
  cipherSuites?: string[];
  /** Default 10_000. */
  handshakeTimeoutMs?: number;
}

export interface TlsClientErrorInfo {
  remoteAddress: string;
  pskIdentity?: string;
}

interface ConnectionConfig {
  lookupPsk(identity: string): Promise<Buffer | null>;
  suites: readonly CipherSuite[];
  handshakeTimeoutMs: number;
}

type State = 'client_hello' | 'client_key_exchange' | 'psk_lookup' | 'change_cipher_spec' | 'finished' | 'established' | 'closed';

const CCS_FRAGMENT = Buffer.from([1]);
const EMPTY = Buffer.alloc(0);

function writeSeq(buf: Buffer, seq: number): Buffer {
  buf.writeUInt32BE(Math.floor(seq / 0x100000000), 0);
  buf.writeUInt32BE(seq >>> 0, 4);
  return buf;
}

/** Plaintext side of one TLS connection. Created by createPskTlsServer; emitted only after a completed handshake. */
export class PskTlsConnection extends Duplex {
  readonly encrypted = true;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly remoteFamily: string;

  readonly #socket: net.Socket;
  readonly #server: net.Server;
  readonly #config: ConnectionConfig;
  #state: State = 'client_hello';
  readonly #reader = new RecordReader();
  readonly #hs = new HandshakeReassembler();
  readonly #transcript: Hash = createHash('sha256');
  #suspended = false;
  #timer: NodeJS.Timeout | undefined;
  #closeTimer: NodeJS.Timeout | undefined;
  #socketClosing = false;
  #socketPaused = false;
  #corked = false;
  #gotCloseNotify = false;
  #sentCloseNotify = false;

  #clientRandom: Buffer = EMPTY;
  #serverRandom: Buffer = EMPTY;
  #suite: CipherSuite | undefined;
  #ems = false;
  #secureRenegotiation = false;
  #identity: string | undefined;
  /** Why the identity named no key (the peer sees a wrong-key failure; the server's error says this). */
  #unknownIdentity: string | undefined;
  #master: KeyObject | undefined;
  #clientProtection: RecordProtection | null = null;
  #serverProtection: RecordProtection | null = null;
  #readProtection: RecordProtection | null = null;
  #writeProtection: RecordProtection | null = null;
  #readSeq = 0;
  #writeSeq = 0;
  readonly #readSeqBuf = Buffer.alloc(8);
  readonly #writeSeqBuf = Buffer.alloc(8);

  constructor(socket: net.Socket, server: net.Server, config: ConnectionConfig) {
    super({ allowHalfOpen: false });
    this.#socket = socket;
    this.#server = server;
    this.#config = config;
    this.remoteAddress = socket.remoteAddress ?? '';
    this.remotePort = socket.remotePort ?? 0;
    this.remoteFamily = socket.remoteFamily ?? '';
    socket.on('data', this.#onSocketData);
    socket.on('end', this.#onSocketEnd);
    socket.on('error', this.#onSocketError);
    socket.on('close', this.#onSocketClose);
    socket.on('timeout', () => this.emit('timeout'));
    this.#timer = setTimeout(() => this.#fail(new Error('TLS handshake timeout'), undefined), config.handshakeTimeoutMs);
  }

  // ---- public read-only state --------------------------------------------------------------------------------

  get pskIdentity(): string {
    return this.#identity ?? '';
  }
  /** IANA name of the negotiated suite, e.g. TLS_PSK_WITH_AES_128_CCM_8. */
  get cipherSuite(): string {
    return this.#suite?.name ?? '';
  }
  /** True when RFC 7627 extended master secret was negotiated. */
  get extendedMasterSecret(): boolean {
    return this.#ems;
  }
  /** True when the client signalled RFC 5746 support (extension or SCSV). */
  get secureRenegotiation(): boolean {
    return this.#secureRenegotiation;
  }
  get protocol(): string {
    return 'TLSv1.2';
  }

  // ---- net.Socket-like surface used by node:http ---------------------------------------------------------------

  setTimeout(ms: number, cb?: () => void): this {
    this.#socket.setTimeout(ms);
    if (cb) {
      if (ms === 0) this.removeListener('timeout', cb);
      else this.once('timeout', cb);
    }
    return this;
  }
  setNoDelay(noDelay?: boolean): this {
    this.#socket.setNoDelay(noDelay);
    return this;
  }
  setKeepAlive(enable?: boolean, initialDelay?: number): this {
    this.#socket.setKeepAlive(enable, initialDelay);
    return this;
  }
  destroySoon(): void {
    if (this.writable) this.end();
    if (this.writableFinished) this.destroy();
    else this.once('finish', () => this.destroy());
  }
  ref(): this {
    this.#socket.ref();
    return this;
  }
  unref(): this {
    this.#socket.unref();
    return this;
  }
  address(): ReturnType<net.Socket['address']> {
    return this.#socket.address();
  }
  get localAddress(): string | undefined {
    return this.#socket.localAddress;
  }
  get localPort(): number | undefined {
    return this.#socket.localPort;
  }

  // ---- Duplex implementation ---------------------------------------------------------------------------------

  override _read(): void {
    if (this.#socketPaused) {
      this.#socketPaused = false;
      this.#socket.resume();
    }
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.#writeApplicationData(chunk, cb);
  }

  override _writev(chunks: Array<{ chunk: Buffer }>, cb: (err?: Error | null) => void): void {
    if (chunks.length === 1) {
      this.#writeApplicationData(chunks[0].chunk, cb);
      return;
    }
    let total = 0;
    const bufs = new Array<Buffer>(chunks.length);
    for (let i = 0; i < chunks.length; i++) {
      bufs[i] = chunks[i].chunk;
      total += bufs[i].length;
    }
    this.#writeApplicationData(Buffer.concat(bufs, total), cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.#state === 'established' && !this.#sentCloseNotify && this.#socket.writable) {
      this.#sentCloseNotify = true;
      this.#socket.end(this.#alertRecord(AlertLevel.warning, AlertDescription.close_notify));
    } else if (!this.#socketClosing) {
      this.#socket.end();
    }
    cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    clearTimeout(this.#timer);
    if (this.#state !== 'closed') this.#state = 'closed';
    if (!this.#socketClosing) this.#socket.destroy();
    cb(err);
  }

  #writeApplicationData(data: Buffer, cb: (err?: Error | null) => void): void {
    if (this.#state !== 'established' || this.#sentCloseNotify) {
      cb(new Error('TLS connection is not writable'));
      return;
    }
    if (data.length === 0) {
      cb();
      return;
    }
    const socket = this.#socket;
    // Coalesce every record produced in this tick (e.g. several pipelined HTTP responses) into one writev.
    if (!this.#corked) {
      this.#corked = true;
      socket.cork();
      process.nextTick(this.#uncork);
    }
    let ok = true;
    for (let o = 0; o < data.length; o += MAX_PLAINTEXT_LENGTH) {
      const slice = o === 0 && data.length <= MAX_PLAINTEXT_LENGTH ? data : data.subarray(o, o + MAX_PLAINTEXT_LENGTH);
      ok = socket.write(this.#seal(ContentType.application_data, slice));
    }
    if (ok) cb();
    else socket.once('drain', () => cb());
  }

  #uncork = (): void => {
    this.#corked = false;
    this.#socket.uncork();
  };

  // ---- record layer glue ----------------------------------------------------------------------------------------

  /** Protects one fragment (≤ 2^14 bytes) with the current write state and frames it. */
  #seal(type: number, data: Buffer): Buffer {
    const prot = this.#writeProtection;
    if (!prot) return encodePlaintextRecord(type, TLS12, data);
    writeSeq(this.#writeSeqBuf, this.#writeSeq++);
    const out = prot.seal(this.#writeSeqBuf, type, TLS12, data, RECORD_HEADER_LENGTH);
    writeRecordHeader(out, 0, type, TLS12, out.length - RECORD_HEADER_LENGTH);
    return out;
  }

  #alertRecord(level: number, description: number): Buffer {
    return this.#seal(ContentType.alert, Buffer.from([level, description]));
  }

  #onSocketData = (chunk: Buffer): void => {
    if (this.#state === 'closed' || this.#gotCloseNotify) return;
    this.#reader.push(chunk);
    this.#pump();
  };

  #onSocketEnd = (): void => {
    if (this.#state === 'established') {
      if (!this.#gotCloseNotify) this.push(null); // EOF without close_notify: end of stream for the app
    } else {
      this.#fail(new Error('connection closed by peer during TLS handshake'), undefined);
    }
  };

  #onSocketError = (err: Error): void => {
    if (this.#state === 'established') this.destroy(err);
    else this.#fail(err, undefined);
  };

  #onSocketClose = (): void => {
    clearTimeout(this.#closeTimer);
    if (this.#state !== 'established' && this.#state !== 'closed') {
      this.#fail(new Error('connection closed during TLS handshake'), undefined);
    }
    if (!this.destroyed) this.destroy();
  };

  /** Processes buffered handshake messages and records until more input is needed or processing is suspended. */
  #pump(): void {
    try {
      while (!this.#suspended && this.#state !== 'closed' && !this.#gotCloseNotify) {
        const msg = this.#hs.next();
        if (msg) {
          this.#onHandshakeMessage(msg);
          continue;
        }
        if (!this.#reader.next()) break;
        this.#onRecord(this.#reader.type, this.#reader.version, this.#reader.fragment);
      }
    } catch (err) {
      this.#fail(err, err instanceof TlsAlert ? err.description : AlertDescription.internal_error);
    }
  }

  #onRecord(type: number, version: number, fragment: Buffer): void {
    if (version !== TLS12 && this.#state !== 'client_hello') {
      throw new TlsAlert(AlertDescription.protocol_version, 'unexpected record version');
    }
    let data = fragment;
    const prot = this.#readProtection;
    if (prot) {
      data = prot.open(writeSeq(this.#readSeqBuf, this.#readSeq++), type, version, fragment);
      if (data.length > MAX_PLAINTEXT_LENGTH) throw new TlsAlert(AlertDescription.record_overflow, 'plaintext too large');
    }
    switch (type) {
      case ContentType.application_data:
        if (this.#state !== 'established') throw new TlsAlert(AlertDescription.unexpected_message, 'early application data');
        if (data.length > 0 && !this.push(data)) {
          this.#socketPaused = true;
          this.#socket.pause();
        }
        return;
      case ContentType.handshake:
        if (data.length === 0) throw new TlsAlert(AlertDescription.unexpected_message, 'empty handshake record');
        this.#hs.push(data);
        return;
      case ContentType.change_cipher_spec:
        if (this.#state !== 'change_cipher_spec' || this.#hs.hasPartial) {
          throw new TlsAlert(AlertDescription.unexpected_message, 'unexpected ChangeCipherSpec');
        }
        if (data.length !== 1 || data[0] !== 1) throw new TlsAlert(AlertDescription.decode_error, 'bad ChangeCipherSpec');
        this.#readProtection = this.#clientProtection;
        this.#readSeq = 0;
        this.#reader.maxFragmentLength = MAX_CIPHERTEXT_LENGTH;
        this.#state = 'finished';
        return;
      case ContentType.alert:
        this.#onAlert(data);
        return;
    }
  }

  #onAlert(data: Buffer): void {
    if (data.length !== 2) throw new TlsAlert(AlertDescription.decode_error, 'bad alert');
    const [level, description] = data;
    if (description === AlertDescription.close_notify) {
      if (this.#state !== 'established') {
        this.#fail(new Error('peer sent close_notify during handshake'), undefined);
        return;
      }
      this.#gotCloseNotify = true;
      this.push(null); // with allowHalfOpen=false the writable side then ends → _final sends our close_notify
      return;
    }
    if (level === AlertLevel.fatal) {
      this.#fail(new TlsPeerAlert(description), undefined);
    }
    // other warning alerts are ignored
  }

  // ---- handshake state machine ----------------------------------------------------------------------------------

  #onHandshakeMessage(msg: HandshakeMessage): void {
    switch (this.#state) {
      case 'client_hello':
        expectType(msg, HandshakeType.client_hello);
        this.#transcript.update(msg.raw);
        this.#onClientHello(parseClientHello(msg.body));
        this.#state = 'client_key_exchange';
        return;
      case 'client_key_exchange': {
        expectType(msg, HandshakeType.client_key_exchange);
        this.#transcript.update(msg.raw);
        const { identity, byteLength } = readPskIdentity(msg.body);
        this.#state = 'psk_lookup';
        this.#suspended = true; // records already read stay buffered in #reader until the lookup settles
        // and nothing more is read meanwhile: what the peer sends waits in the kernel (TCP flow control), not here
        this.#socket.pause();
        if (identity === undefined) {
          // no device has one: not looked up (no query, no cache key chosen by the peer), answered as unknown
          this.#unknownIdentity = `PSK identity of ${byteLength} bytes (at most ${MAX_PSK_IDENTITY_BYTES} are looked up)`;
          Promise.resolve(null).then((psk) => this.#onPsk(psk));
          return;
        }
        this.#identity = identity;
        this.#startPskLookup(identity);
        return;
      }
      case 'finished':
        expectType(msg, HandshakeType.finished);
        this.#onClientFinished(msg);
        return;
      case 'established':
        if (msg.type === HandshakeType.client_hello) {
          // RFC 5746 §4.4-style refusal: we never renegotiate.
          this.#socket.write(this.#alertRecord(AlertLevel.warning, AlertDescription.no_renegotiation));
          return;
        }
        throw new TlsAlert(AlertDescription.unexpected_message, 'unexpected post-handshake message');
      default:
        throw new TlsAlert(AlertDescription.unexpected_message, `unexpected handshake message ${msg.type}`);
    }
  }

  #onClientHello(ch: ClientHello): void {
    if (ch.clientVersion < TLS12) throw new TlsAlert(AlertDescription.protocol_version, 'client does not offer TLS 1.2');
    const sv = findExtension(ch.extensions, ExtensionType.supported_versions);
    if (sv && !supportedVersionsInclude(sv.data, TLS12)) {
      throw new TlsAlert(AlertDescription.protocol_version, 'client supported_versions lacks TLS 1.2');
    }
    const offer = checkClientHelloOffer(ch);
    const suite = chooseSuite(this.#config.suites, ch.cipherSuites);

    this.#suite = suite;
    this.#ems = offer.extendedMasterSecret;
    this.#secureRenegotiation = offer.secureRenegotiation;
    this.#clientRandom = Buffer.from(ch.random);
    this.#serverRandom = publicRandomBytes(32);

    const extensions: Extension[] = [];
    if (this.#secureRenegotiation) extensions.push({ type: ExtensionType.renegotiation_info, data: Buffer.from([0]) });
    if (this.#ems) extensions.push({ type: ExtensionType.extended_master_secret, data: EMPTY });
    const serverHello = encodeHandshake(
      HandshakeType.server_hello,
      encodeServerHello({ serverVersion: TLS12, random: this.#serverRandom, sessionId: EMPTY, cipherSuite: suite.id, extensions }),
    );
    const serverHelloDone = encodeHandshake(HandshakeType.server_hello_done, encodeServerHelloDone());
    this.#transcript.update(serverHello).update(serverHelloDone);
    // No ServerKeyExchange: we send no PSK identity hint (RFC 4279 §2).
    this.#socket.write(encodePlaintextRecord(ContentType.handshake, TLS12, Buffer.concat([serverHello, serverHelloDone])));
  }

  #startPskLookup(identity: string): void {
    lookupPskSafely(this.#config.lookupPsk, identity).then(
      (psk) => this.#onPsk(psk),
      (err: unknown) => this.#fail(err, AlertDescription.internal_error),
    );
  }

  #onPsk(psk: Buffer | null): void {
    if (this.#state !== 'psk_lookup') return; // connection went away meanwhile
    try {
      // an unknown identity goes on with a stand-in key and fails at the client's Finished as a wrong key does
      const { key, known } = pskOrStandIn(psk, this.#identity);
      if (!known) this.#unknownIdentity ??= `unknown PSK identity ${JSON.stringify(this.#identity)}`;
      const suite = this.#suite!;
      const n = { extendedMasterSecret: this.#ems, clientRandom: this.#clientRandom, serverRandom: this.#serverRandom };
      this.#master = createSecretKey(pskMasterSecret(key, n, () => this.#transcript.copy().digest()));
      const block = keyExpansion(this.#master, this.#serverRandom, this.#clientRandom, keyBlockLength(suite));
      const k = splitKeyBlock(block, suite.macKeyLength, suite.encKeyLength, suite.fixedIvLength);
      // no longer needed (no resumption here), and the server random's slice would keep its random pool alive
      this.#clientRandom = EMPTY;
      this.#serverRandom = EMPTY;
      this.#clientProtection = suite.createProtection(k.clientMacKey, k.clientKey, k.clientIv);
      this.#serverProtection = suite.createProtection(k.serverMacKey, k.serverKey, k.serverIv);
      this.#state = 'change_cipher_spec';
      this.#suspended = false;
      this.#socket.resume();
    } catch (err) {
      this.#fail(err, err instanceof TlsAlert ? err.description : AlertDescription.internal_error);
      return;
    }
    this.#pump();
  }

  #onClientFinished(msg: HandshakeMessage): void {
    checkClientFinished(this.#master!, this.#transcript.copy().digest(), msg.body);
    this.#transcript.update(msg.raw);
    const finished = encodeHandshake(HandshakeType.finished, serverFinishedData(this.#master!, this.#transcript.digest()));
    const ccs = encodePlaintextRecord(ContentType.change_cipher_spec, TLS12, CCS_FRAGMENT);
    this.#writeProtection = this.#serverProtection;
    this.#writeSeq = 0;
    const fin = this.#seal(ContentType.handshake, finished);
    this.#socket.write(Buffer.concat([ccs, fin]));
    this.#state = 'established';
    clearTimeout(this.#timer);
    this.#timer = undefined;
    process.nextTick(() => {
      if (!this.destroyed) this.#server.emit('secureConnection', this);
    });
  }

  /** Ends the connection: optional fatal alert to the peer, 'tlsClientError' during the handshake. */
  #fail(err: unknown, alert: number | undefined): void {
    if (this.#state === 'closed') return;
    let error = err instanceof Error ? err : new Error(String(err));
    if (this.#unknownIdentity !== undefined) error = new Error(`${this.#unknownIdentity}: ${error.message}`, { cause: error });
    const wasEstablished = this.#state === 'established';
    this.#state = 'closed';
    clearTimeout(this.#timer);
    const socket = this.#socket;
    if (alert !== undefined && socket.writable) {
      this.#socketClosing = true;
      socket.end(this.#alertRecord(AlertLevel.fatal, alert));
      this.#closeTimer = setTimeout(() => socket.destroy(), 2000);
      this.#closeTimer.unref();
    } else {
      socket.destroy();
    }
    if (wasEstablished) {
      this.destroy(error);
    } else {
      const info: TlsClientErrorInfo = { remoteAddress: this.remoteAddress };
      if (this.#identity !== undefined) info.pskIdentity = this.#identity;
      this.#server.emit('tlsClientError', error, info);
      this.destroy();
    }
  }
}

function supportedVersionsInclude(data: Buffer, version: number): boolean {
  if (data.length < 1 || data[0] !== data.length - 1 || data[0] % 2 !== 0) {
    throw new TlsAlert(AlertDescription.decode_error, 'bad supported_versions');
  }
  for (let i = 1; i < data.length; i += 2) if (data.readUInt16BE(i) === version) return true;
  return false;
}

function resolveSuites(names: string[] | undefined): CipherSuite[] {
  if (!names) return [...CIPHER_SUITES];
  return names.map((n) => {
    const s = cipherSuiteByName(n);
    if (!s) throw new Error(`unsupported cipher suite ${n}`);
    return s;
  });
}

/**
 * Accepts TCP connections and emits 'secureConnection' (conn: PskTlsConnection) after a completed handshake, and
 * 'tlsClientError' (err: Error, info: { remoteAddress, pskIdentity? }) when a handshake fails.
 */
export function createPskTlsServer(opts: PskTlsServerOptions): net.Server {
  const suites = resolveSuites(opts.cipherSuites);
  if (suites.length === 0) throw new Error('no cipher suites configured');
  const config: ConnectionConfig = {
    lookupPsk: opts.lookupPsk,
    suites,
    handshakeTimeoutMs: opts.handshakeTimeoutMs ?? 10_000,
  };
  const server: net.Server = net.createServer({ noDelay: true }, (socket) => {
    new PskTlsConnection(socket, server, config);
  });
  return server;
}
