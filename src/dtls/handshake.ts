/**
 * DTLS handshake framing (RFC 6347 §4.2.2–4.2.3): the 12-byte handshake header (msg_type, length, message_seq,
 * fragment_offset, fragment_length), fragmentation of outgoing messages to fit a datagram, and reassembly of
 * incoming fragments that arrive split, shuffled or duplicated. Also the transcript form of a message (§4.2.6).
 */
import { AlertDescription, TlsAlert } from '../tls/alert.ts';

export const HANDSHAKE_HEADER_LENGTH = 12;
/** Largest handshake message accepted from a peer (PSK flights are tiny; this bounds reassembly memory). */
export const MAX_MESSAGE_LENGTH = 16384;
/** How far ahead of the expected message_seq fragments are buffered. */
const MAX_AHEAD = 4;

export interface HandshakeFragment {
  type: number;
  length: number;
  messageSeq: number;
  fragmentOffset: number;
  body: Buffer;
}

export interface HandshakeMessage {
  type: number;
  messageSeq: number;
  body: Buffer;
}

/** Parses every handshake fragment in one record's plaintext; throws decode_error on malformed framing. */
export function parseHandshakeFragments(data: Buffer): HandshakeFragment[] {
  const out: HandshakeFragment[] = [];
  let o = 0;
  while (o < data.length) {
    if (data.length - o < HANDSHAKE_HEADER_LENGTH) throw new TlsAlert(AlertDescription.decode_error, 'short handshake header');
    const type = data[o];
    const length = data.readUIntBE(o + 1, 3);
    const messageSeq = data.readUInt16BE(o + 4);
    const fragmentOffset = data.readUIntBE(o + 6, 3);
    const fragmentLength = data.readUIntBE(o + 9, 3);
    const end = o + HANDSHAKE_HEADER_LENGTH + fragmentLength;
    if (end > data.length || fragmentOffset + fragmentLength > length) {
      throw new TlsAlert(AlertDescription.decode_error, 'bad handshake fragment');
    }
    out.push({ type, length, messageSeq, fragmentOffset, body: data.subarray(o + HANDSHAKE_HEADER_LENGTH, end) });
    o = end;
  }
  return out;
}

export function encodeFragment(type: number, messageSeq: number, length: number, offset: number, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(HANDSHAKE_HEADER_LENGTH + body.length);
  out[0] = type;
  out.writeUIntBE(length, 1, 3);
  out.writeUInt16BE(messageSeq, 4);
  out.writeUIntBE(offset, 6, 3);
  out.writeUIntBE(body.length, 9, 3);
  body.copy(out, HANDSHAKE_HEADER_LENGTH);
  return out;
}

/** The unfragmented message as it enters the handshake hash (fragment_offset 0, fragment_length = length). */
export function transcriptBytes(msg: HandshakeMessage): Buffer {
  return encodeFragment(msg.type, msg.messageSeq, msg.body.length, 0, msg.body);
}

/** Splits a message into fragments whose body is at most `maxBody` bytes (at least one fragment, even if empty). */
export function fragmentMessage(msg: HandshakeMessage, maxBody: number): Buffer[] {
  if (maxBody < 1) throw new Error('MTU too small for a handshake fragment');
  const len = msg.body.length;
  const out: Buffer[] = [];
  let off = 0;
  do {
    const n = Math.min(maxBody, len - off);
    out.push(encodeFragment(msg.type, msg.messageSeq, len, off, msg.body.subarray(off, off + n)));
    off += n;
  } while (off < len);
  return out;
}

interface Partial {
  type: number;
  body: Buffer;
  /** One byte per body byte: 1 once received. PSK messages are small, so a byte map is simpler than ranges. */
  have: Uint8Array;
  missing: number;
}

/**
 * Delivers handshake messages in message_seq order, each exactly once, from fragments in any order.
 * `push` returns 'old' for a fragment of an already delivered message: the peer retransmitted its last flight.
 */
export class HandshakeReassembler {
  #next: number;
  /** Messages being assembled; created on demand and dropped when empty (an idle session holds none). */
  #partial: Map<number, Partial> | undefined;

  constructor(nextSeq = 0) {
    this.#next = nextSeq;
  }

  get nextSeq(): number {
    return this.#next;
  }

  push(f: HandshakeFragment): 'old' | 'buffered' | 'ignored' {
    if (f.messageSeq < this.#next) return 'old';
    if (f.messageSeq >= this.#next + MAX_AHEAD) return 'ignored';
    if (f.length > MAX_MESSAGE_LENGTH) throw new TlsAlert(AlertDescription.handshake_failure, 'handshake message too large');
    this.#partial ??= new Map();
    let p = this.#partial.get(f.messageSeq);
    if (!p) {
      p = { type: f.type, body: Buffer.alloc(f.length), have: new Uint8Array(f.length), missing: f.length };
      this.#partial.set(f.messageSeq, p);
    } else if (p.type !== f.type || p.body.length !== f.length) {
      throw new TlsAlert(AlertDescription.illegal_parameter, 'inconsistent handshake fragments');
    }
    f.body.copy(p.body, f.fragmentOffset);
    for (let i = f.fragmentOffset; i < f.fragmentOffset + f.body.length; i++) {
      if (p.have[i] === 0) {
        p.have[i] = 1;
        p.missing--;
      }
    }
    return 'buffered';
  }

  /** The next complete message in order, or null. */
  next(): HandshakeMessage | null {
    const p = this.#partial?.get(this.#next);
    if (!p || p.missing > 0) return null;
    this.#partial!.delete(this.#next);
    if (this.#partial!.size === 0) this.#partial = undefined;
    return { type: p.type, messageSeq: this.#next++, body: p.body };
  }
}
