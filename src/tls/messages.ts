/**
 * Handshake message bodies (RFC 5246 §7.4, RFC 4279 §2): encode/decode only, no transport framing beyond the
 * 4-byte TLS handshake header helper. DTLS reuses the body codecs (ClientHello takes a `dtls` flag for the cookie).
 */
import { AlertDescription, TlsAlert } from './alert.ts';

export const HandshakeType = {
  hello_request: 0,
  client_hello: 1,
  server_hello: 2,
  hello_verify_request: 3,
  certificate: 11,
  server_key_exchange: 12,
  certificate_request: 13,
  server_hello_done: 14,
  certificate_verify: 15,
  client_key_exchange: 16,
  finished: 20,
} as const;

export const ExtensionType = {
  server_name: 0,
  encrypt_then_mac: 22,
  extended_master_secret: 23,
  supported_versions: 43,
  renegotiation_info: 0xff01,
} as const;

export const TLS_EMPTY_RENEGOTIATION_INFO_SCSV = 0x00ff;
export const RANDOM_LENGTH = 32;

export interface Extension {
  type: number;
  data: Buffer;
}

export interface ClientHello {
  clientVersion: number;
  random: Buffer;
  sessionId: Buffer;
  /** DTLS only. */
  cookie?: Buffer;
  cipherSuites: number[];
  compressionMethods: Buffer;
  extensions: Extension[];
}

export interface ServerHello {
  serverVersion: number;
  random: Buffer;
  sessionId: Buffer;
  cipherSuite: number;
  extensions: Extension[];
}

/** Bounds-checked big-endian reader; every overrun is a decode_error. */
export class ByteReader {
  private readonly buf: Buffer;
  off = 0;
  constructor(buf: Buffer) {
    this.buf = buf;
  }
  get remaining(): number {
    return this.buf.length - this.off;
  }
  private need(n: number): void {
    if (this.off + n > this.buf.length) throw new TlsAlert(AlertDescription.decode_error, 'truncated message');
  }
  u8(): number {
    this.need(1);
    return this.buf[this.off++];
  }
  u16(): number {
    this.need(2);
    const v = this.buf.readUInt16BE(this.off);
    this.off += 2;
    return v;
  }
  bytes(n: number): Buffer {
    this.need(n);
    return this.buf.subarray(this.off, (this.off += n));
  }
  vec8(): Buffer {
    return this.bytes(this.u8());
  }
  vec16(): Buffer {
    return this.bytes(this.u16());
  }
  end(): void {
    if (this.off !== this.buf.length) throw new TlsAlert(AlertDescription.decode_error, 'trailing bytes in message');
  }
}

export function parseExtensions(data: Buffer): Extension[] {
  const r = new ByteReader(data);
  const out: Extension[] = [];
  const seen = new Set<number>();
  while (r.remaining > 0) {
    const type = r.u16();
    const body = r.vec16();
    if (seen.has(type)) throw new TlsAlert(AlertDescription.illegal_parameter, `duplicate extension ${type}`);
    seen.add(type);
    out.push({ type, data: body });
  }
  return out;
}

export function encodeExtensions(exts: Extension[]): Buffer {
  if (exts.length === 0) return Buffer.alloc(0);
  const total = exts.reduce((n, e) => n + 4 + e.data.length, 0);
  const out = Buffer.allocUnsafe(2 + total);
  out.writeUInt16BE(total, 0);
  let o = 2;
  for (const e of exts) {
    o = out.writeUInt16BE(e.type, o);
    o = out.writeUInt16BE(e.data.length, o);
    o += e.data.copy(out, o);
  }
  return out;
}

export function parseClientHello(body: Buffer, opts: { dtls?: boolean } = {}): ClientHello {
  const r = new ByteReader(body);
  const clientVersion = r.u16();
  const random = r.bytes(RANDOM_LENGTH);
  const sessionId = r.vec8();
  if (sessionId.length > 32) throw new TlsAlert(AlertDescription.illegal_parameter, 'session_id too long');
  const cookie = opts.dtls ? r.vec8() : undefined;
  const suitesRaw = r.vec16();
  if (suitesRaw.length < 2 || suitesRaw.length % 2 !== 0) {
    throw new TlsAlert(AlertDescription.decode_error, 'bad cipher_suites length');
  }
  const cipherSuites: number[] = [];
  for (let i = 0; i < suitesRaw.length; i += 2) cipherSuites.push(suitesRaw.readUInt16BE(i));
  const compressionMethods = r.vec8();
  if (compressionMethods.length < 1) throw new TlsAlert(AlertDescription.decode_error, 'no compression methods');
  let extensions: Extension[] = [];
  if (r.remaining > 0) {
    extensions = parseExtensions(r.vec16());
    r.end();
  }
  return { clientVersion, random, sessionId, cookie, cipherSuites, compressionMethods, extensions };
}

export function encodeClientHello(ch: ClientHello, opts: { dtls?: boolean } = {}): Buffer {
  const suites = Buffer.allocUnsafe(2 + ch.cipherSuites.length * 2);
  suites.writeUInt16BE(ch.cipherSuites.length * 2, 0);
  ch.cipherSuites.forEach((s, i) => suites.writeUInt16BE(s, 2 + 2 * i));
  const parts = [
    u16(ch.clientVersion),
    ch.random,
    Buffer.from([ch.sessionId.length]),
    ch.sessionId,
    ...(opts.dtls ? [Buffer.from([ch.cookie?.length ?? 0]), ch.cookie ?? Buffer.alloc(0)] : []),
    suites,
    Buffer.from([ch.compressionMethods.length]),
    ch.compressionMethods,
    encodeExtensions(ch.extensions),
  ];
  return Buffer.concat(parts);
}

export function encodeServerHello(sh: ServerHello): Buffer {
  return Buffer.concat([
    u16(sh.serverVersion),
    sh.random,
    Buffer.from([sh.sessionId.length]),
    sh.sessionId,
    u16(sh.cipherSuite),
    Buffer.from([0]), // compression_method null
    encodeExtensions(sh.extensions),
  ]);
}

export function parseServerHello(body: Buffer): ServerHello {
  const r = new ByteReader(body);
  const serverVersion = r.u16();
  const random = r.bytes(RANDOM_LENGTH);
  const sessionId = r.vec8();
  const cipherSuite = r.u16();
  r.u8();
  const extensions = r.remaining > 0 ? parseExtensions(r.vec16()) : [];
  r.end();
  return { serverVersion, random, sessionId, cipherSuite, extensions };
}

/** ServerHelloDone has an empty body. */
export function encodeServerHelloDone(): Buffer {
  return Buffer.alloc(0);
}

/** RFC 4279 §2: ClientKeyExchange for plain PSK = opaque psk_identity<0..2^16-1>. */
export function parseClientKeyExchangePsk(body: Buffer): Buffer {
  const r = new ByteReader(body);
  const identity = r.vec16();
  r.end();
  return identity;
}

export function encodeClientKeyExchangePsk(identity: Buffer): Buffer {
  return Buffer.concat([u16(identity.length), identity]);
}

export function encodeFinished(verifyData: Buffer): Buffer {
  return verifyData;
}

export function parseFinished(body: Buffer, verifyDataLength = 12): Buffer {
  if (body.length !== verifyDataLength) throw new TlsAlert(AlertDescription.decode_error, 'bad Finished length');
  return body;
}

/** TLS handshake header: msg_type(1) || length(3) || body. */
export function encodeHandshake(type: number, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(4 + body.length);
  out[0] = type;
  out.writeUIntBE(body.length, 1, 3);
  body.copy(out, 4);
  return out;
}

function u16(v: number): Buffer {
  const b = Buffer.allocUnsafe(2);
  b.writeUInt16BE(v, 0);
  return b;
}

export function findExtension(exts: Extension[], type: number): Extension | undefined {
  return exts.find((e) => e.type === type);
}

/** Throws unexpected_message unless `msg` is a handshake message of `type` (TLS and DTLS messages alike). */
export function expectType(msg: { type: number }, type: number): void {
  if (msg.type !== type) {
    throw new TlsAlert(AlertDescription.unexpected_message, `expected handshake type ${type}, got ${msg.type}`);
  }
}

/** What a ClientHello starting a new handshake asks for, once checkClientHelloOffer accepted it. */
export interface ClientHelloOffer {
  /** RFC 7627: the client offered extended_master_secret. */
  extendedMasterSecret: boolean;
  /** RFC 5746: the client signalled secure renegotiation, by extension or SCSV. */
  secureRenegotiation: boolean;
}

/**
 * The checks of a ClientHello that do not depend on the protocol version (TLS 1.2 and DTLS 1.2 servers make both):
 * null compression offered, renegotiation_info empty in an initial handshake (RFC 5746 §3.6), extended_master_secret
 * empty (RFC 7627 §5.1). Throws the TlsAlert the handshake ends with.
 */
export function checkClientHelloOffer(ch: ClientHello): ClientHelloOffer {
  if (!ch.compressionMethods.includes(0)) throw new TlsAlert(AlertDescription.illegal_parameter, 'no null compression');
  const ri = findExtension(ch.extensions, ExtensionType.renegotiation_info);
  if (ri && !(ri.data.length === 1 && ri.data[0] === 0)) {
    throw new TlsAlert(AlertDescription.handshake_failure, 'non-empty renegotiation_info in initial handshake');
  }
  const ems = findExtension(ch.extensions, ExtensionType.extended_master_secret);
  if (ems && ems.data.length !== 0) throw new TlsAlert(AlertDescription.decode_error, 'bad extended_master_secret');
  return {
    extendedMasterSecret: ems !== undefined,
    secureRenegotiation: ri !== undefined || ch.cipherSuites.includes(TLS_EMPTY_RENEGOTIATION_INFO_SCSV),
  };
}
