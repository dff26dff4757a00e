/**
 * TLS record layer framing (RFC 5246 §6.2): splits a byte stream into records and enforces size limits, and
 * reassembles handshake messages that are fragmented across records or packed several to a record.
 * Knows nothing about keys; protection is applied by the caller using a suite's RecordProtection.
 */
import { AlertDescription, TlsAlert } from './alert.ts';

export const ContentType = {
  change_cipher_spec: 20,
  alert: 21,
  handshake: 22,
  application_data: 23,
} as const;

export const RECORD_HEADER_LENGTH = 5;
/** TLSPlaintext.length limit: 2^14. */
export const MAX_PLAINTEXT_LENGTH = 16384;
/** TLSCiphertext.length limit: 2^14 + 2048. */
export const MAX_CIPHERTEXT_LENGTH = 16384 + 2048;

const EMPTY = Buffer.alloc(0);

/**
 * Incremental record parser. Call push() with socket data, then next() until it returns false; after a true
 * result `type`, `version` and `fragment` describe the record (fragment is a view into the input, no copy).
 */
export class RecordReader {
  private buf: Buffer = EMPTY;
  private off = 0;
  /** Largest fragment accepted; raise to MAX_CIPHERTEXT_LENGTH once records are protected. */
  maxFragmentLength = MAX_PLAINTEXT_LENGTH;
  type = 0;
  version = 0;
  fragment: Buffer = EMPTY;

  push(chunk: Buffer): void {
    if (this.off >= this.buf.length) {
      this.buf = chunk;
    } else {
      this.buf = Buffer.concat([this.buf.subarray(this.off), chunk]);
    }
    this.off = 0;
  }

  get bufferedLength(): number {
    return this.buf.length - this.off;
  }

  /** Parses the next complete record, or returns false if more bytes are needed. Throws TlsAlert on bad framing. */
  next(): boolean {
    const buf = this.buf;
    const off = this.off;
    if (buf.length - off < RECORD_HEADER_LENGTH) {
      // Validate what we can already: lets garbage be rejected without waiting for 5 bytes.
      if (buf.length > off) checkType(buf[off]);
      return false;
    }
    const type = buf[off];
    checkType(type);
    if (buf[off + 1] !== 3) throw new TlsAlert(AlertDescription.protocol_version, 'bad record version');
    const length = (buf[off + 3] << 8) | buf[off + 4];
    if (length > this.maxFragmentLength) throw new TlsAlert(AlertDescription.record_overflow, 'record too large');
    const end = off + RECORD_HEADER_LENGTH + length;
    if (end > buf.length) return false;
    this.type = type;
    this.version = (buf[off + 1] << 8) | buf[off + 2];
    this.fragment = buf.subarray(off + RECORD_HEADER_LENGTH, end);
    this.off = end;
    if (end === buf.length) {
      this.buf = EMPTY;
      this.off = 0;
    }
    return true;
  }
}

function checkType(type: number): void {
  if (type < ContentType.change_cipher_spec || type > ContentType.application_data) {
    throw new TlsAlert(AlertDescription.unexpected_message, `bad record content type ${type}`);
  }
}

export function writeRecordHeader(out: Buffer, offset: number, type: number, version: number, length: number): void {
  out[offset] = type;
  out[offset + 1] = version >> 8;
  out[offset + 2] = version & 0xff;
  out[offset + 3] = length >> 8;
  out[offset + 4] = length & 0xff;
}

/** Frames an unprotected fragment (ClientHello/ServerHello flight, CCS, plaintext alerts). */
export function encodePlaintextRecord(type: number, version: number, fragment: Buffer): Buffer {
  const out = Buffer.allocUnsafe(RECORD_HEADER_LENGTH + fragment.length);
  writeRecordHeader(out, 0, type, version, fragment.length);
  fragment.copy(out, RECORD_HEADER_LENGTH);
  return out;
}

export interface HandshakeMessage {
  type: number;
  body: Buffer;
  /** header + body, as hashed into the transcript. */
  raw: Buffer;
}

/** Reassembles TLS handshake messages (4-byte header) from handshake record fragments. */
export class HandshakeReassembler {
  private buf: Buffer = EMPTY;
  private off = 0;
  readonly maxMessageLength: number;

  constructor(maxMessageLength = 65536) {
    this.maxMessageLength = maxMessageLength;
  }

  push(fragment: Buffer): void {
    if (this.off >= this.buf.length) this.buf = fragment;
    else this.buf = Buffer.concat([this.buf.subarray(this.off), fragment]);
    this.off = 0;
  }

  /** True when a partial message is buffered (a CCS or key change must not interleave with one). */
  get hasPartial(): boolean {
    return this.off < this.buf.length;
  }

  next(): HandshakeMessage | null {
    const avail = this.buf.length - this.off;
    if (avail < 4) return null;
    const o = this.off;
    const len = this.buf.readUIntBE(o + 1, 3);
    if (len > this.maxMessageLength) throw new TlsAlert(AlertDescription.handshake_failure, 'handshake message too large');
    if (avail < 4 + len) return null;
    const raw = this.buf.subarray(o, o + 4 + len);
    this.off = o + 4 + len;
    return { type: raw[0], body: raw.subarray(4), raw };
  }
}
