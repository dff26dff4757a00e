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
 * Bytes of a stream not yet consumed, gathered from its chunks. A chunk arriving when nothing is pending is kept as
 * it is (no copy); one arriving behind pending bytes is appended to a buffer that grows geometrically, so a peer
 * sending one byte per TCP segment costs a bounded number of copies per byte, not a copy of all pending bytes each
 * time. Bytes once returned by `pending` are never overwritten, so views of them stay valid.
 */
export class StreamBuffer {
  /** Pending bytes are buf[off, end). */
  private buf: Buffer = EMPTY;
  private off = 0;
  private end = 0;
  /** buf was allocated here, so bytes past `end` may be written. */
  private owned = false;

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    if (this.off >= this.end) {
      this.buf = chunk;
      this.off = 0;
      this.end = chunk.length;
      this.owned = false;
      return;
    }
    if (!this.owned || this.end + chunk.length > this.buf.length) {
      const pending = this.end - this.off;
      const grown = Buffer.allocUnsafe(2 * (pending + chunk.length));
      this.buf.copy(grown, 0, this.off, this.end);
      this.buf = grown;
      this.off = 0;
      this.end = pending;
      this.owned = true;
    }
    chunk.copy(this.buf, this.end);
    this.end += chunk.length;
  }

  get length(): number {
    return this.end - this.off;
  }

  /** The pending bytes, as a view (no copy). */
  get pending(): Buffer {
    return this.buf.subarray(this.off, this.end);
  }

  /** Drops the first `n` pending bytes. */
  consume(n: number): void {
    this.off += n;
    if (this.off >= this.end) {
      this.buf = EMPTY;
      this.off = 0;
      this.end = 0;
      this.owned = false;
    }
  }
}

/**
 * Incremental record parser. Call push() with socket data, then next() until it returns false; after a true
 * result `type`, `version` and `fragment` describe the record (fragment is a view into the input, no copy).
 */
export class RecordReader {
  private readonly input = new StreamBuffer();
  /** Largest fragment accepted; raise to MAX_CIPHERTEXT_LENGTH once records are protected. */
  maxFragmentLength = MAX_PLAINTEXT_LENGTH;
  type = 0;
  version = 0;
  fragment: Buffer = EMPTY;

  push(chunk: Buffer): void {
    this.input.push(chunk);
  }

  get bufferedLength(): number {
    return this.input.length;
  }

  /** Parses the next complete record, or returns false if more bytes are needed. Throws TlsAlert on bad framing. */
  next(): boolean {
    const buf = this.input.pending;
    if (buf.length < RECORD_HEADER_LENGTH) {
      // Validate what we can already: lets garbage be rejected without waiting for 5 bytes.
      if (buf.length > 0) checkType(buf[0]);
      return false;
    }
    const type = buf[0];
    checkType(type);
    if (buf[1] !== 3) throw new TlsAlert(AlertDescription.protocol_version, 'bad record version');
    const length = (buf[3] << 8) | buf[4];
    if (length > this.maxFragmentLength) throw new TlsAlert(AlertDescription.record_overflow, 'record too large');
    const end = RECORD_HEADER_LENGTH + length;
    if (end > buf.length) return false;
    this.type = type;
    this.version = (buf[1] << 8) | buf[2];
    this.fragment = buf.subarray(RECORD_HEADER_LENGTH, end);
    this.input.consume(end);
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

/**
 * Largest handshake message our server accepts. Before the client is authenticated it can only send a ClientHello,
 * a ClientKeyExchange and a Finished; real ClientHellos stay far below one record (2^14), so a larger announced
 * length is refused as soon as its 4-byte header is in, before any of its body is buffered.
 */
export const MAX_HANDSHAKE_MESSAGE_LENGTH = 16384;

/**
 * Reassembles TLS handshake messages (4-byte header) from handshake record fragments. Linear in the bytes pushed:
 * a message contained in one fragment is returned as a view of it; a fragmented one is copied once into a buffer
 * allocated at its announced size, so a peer sending 1-byte records costs one byte copied per byte sent.
 */
export class HandshakeReassembler {
  readonly maxMessageLength: number;
  readonly #header = Buffer.alloc(4);
  #headerFilled = 0;
  /** The message being assembled (header + body), allocated once its header is complete. */
  #message: Buffer | null = null;
  #messageFilled = 0;
  /** Fragments pushed and not yet consumed (normally at most one: callers drain next() before pushing). */
  readonly #inputs: Buffer[] = [];
  #inputOff = 0;

  constructor(maxMessageLength = MAX_HANDSHAKE_MESSAGE_LENGTH) {
    this.maxMessageLength = maxMessageLength;
  }

  push(fragment: Buffer): void {
    if (fragment.length > 0) this.#inputs.push(fragment);
  }

  /** True when a partial message is buffered (a CCS or key change must not interleave with one). */
  get hasPartial(): boolean {
    return this.#headerFilled > 0 || this.#inputs.length > 0;
  }

  /** The next complete message, or null when more fragments are needed. Throws TlsAlert on an oversized one. */
  next(): HandshakeMessage | null {
    while (this.#inputs.length > 0) {
      const input = this.#inputs[0];
      const message = this.#message;
      if (message) {
        const n = Math.min(message.length - this.#messageFilled, input.length - this.#inputOff);
        input.copy(message, this.#messageFilled, this.#inputOff, this.#inputOff + n);
        this.#messageFilled += n;
        this.#consume(n);
        if (this.#messageFilled === message.length) return this.#complete(message);
        continue;
      }
      if (this.#headerFilled === 0 && input.length - this.#inputOff >= 4) {
        // the usual case: a whole message inside one fragment needs no copy
        const o = this.#inputOff;
        const len = this.#checkLength(input.readUIntBE(o + 1, 3));
        if (input.length - o >= 4 + len) {
          const raw = input.subarray(o, o + 4 + len);
          this.#consume(4 + len);
          return { type: raw[0], body: raw.subarray(4), raw };
        }
      }
      const n = Math.min(4 - this.#headerFilled, input.length - this.#inputOff);
      input.copy(this.#header, this.#headerFilled, this.#inputOff, this.#inputOff + n);
      this.#headerFilled += n;
      this.#consume(n);
      if (this.#headerFilled < 4) continue;
      const len = this.#checkLength(this.#header.readUIntBE(1, 3));
      const assembled = Buffer.allocUnsafe(4 + len);
      this.#header.copy(assembled, 0);
      this.#message = assembled;
      this.#messageFilled = 4;
      if (len === 0) return this.#complete(assembled);
    }
    return null;
  }

  #checkLength(len: number): number {
    if (len > this.maxMessageLength) throw new TlsAlert(AlertDescription.handshake_failure, 'handshake message too large');
    return len;
  }

  #consume(n: number): void {
    this.#inputOff += n;
    if (this.#inputOff === this.#inputs[0].length) {
      this.#inputs.shift();
      this.#inputOff = 0;
    }
  }

  #complete(raw: Buffer): HandshakeMessage {
    this.#message = null;
    this.#messageFilled = 0;
    this.#headerFilled = 0;
    return { type: raw[0], body: raw.subarray(4), raw };
  }
}
