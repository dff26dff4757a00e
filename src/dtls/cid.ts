/**
 * Connection ID for DTLS 1.2 (RFC 9146): the connection_id extension (type 54), and record protection for the
 * tls12_cid record (content type 25), whose plaintext is a DTLSInnerPlaintext (content ‖ real type ‖ zero padding)
 * and whose AEAD additional data is, per §5.3:
 *
 *   seq_num_placeholder (8 × 0xff) ‖ tls12_cid ‖ cid_length ‖ tls12_cid ‖ version ‖ epoch ‖ sequence_number ‖ cid
 *   ‖ length_of_DTLSInnerPlaintext
 *
 * Only the AEAD suites (AES-CCM_8, AES-GCM) negotiate a CID here; a CBC-SHA256 session declines the extension
 * (the server simply does not echo it, which RFC 9146 §3 allows) rather than carry a second MAC-then-encrypt code
 * path for a legacy suite.
 */
import { createCipheriv, createDecipheriv, createSecretKey } from 'node:crypto';
import type { CipherCCMTypes, KeyObject } from 'node:crypto';
import { AlertDescription, TlsAlert } from '../tls/alert.ts';

export const EXTENSION_CONNECTION_ID = 54;
export const CONTENT_TYPE_TLS12_CID = 25;
/** Length of the CIDs this server issues: fixed, so a tls12_cid record header can be parsed without state. */
export const SERVER_CID_LENGTH = 8;

const EXPLICIT_NONCE = 8;

/** AEAD parameters of the suites that may carry a CID, by IANA id. */
const AEAD_SUITES = new Map<number, { algorithm: 'aes-128-ccm' | 'aes-128-gcm'; tagLength: number }>([
  [0xc0a8, { algorithm: 'aes-128-ccm', tagLength: 8 }], // TLS_PSK_WITH_AES_128_CCM_8
  [0x00a8, { algorithm: 'aes-128-gcm', tagLength: 16 }], // TLS_PSK_WITH_AES_128_GCM_SHA256
  [0xc0ae, { algorithm: 'aes-128-ccm', tagLength: 8 }], // TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8
  [0xc02b, { algorithm: 'aes-128-gcm', tagLength: 16 }], // TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
]);

export function suiteSupportsCid(suiteId: number): boolean {
  return AEAD_SUITES.has(suiteId);
}

/** ConnectionId extension body: opaque cid<0..2^8-1>. */
export function parseConnectionIdExtension(data: Buffer): Buffer {
  if (data.length < 1 || data[0] !== data.length - 1) throw new TlsAlert(AlertDescription.decode_error, 'bad connection_id extension');
  return data.subarray(1);
}

export function encodeConnectionIdExtension(cid: Buffer): Buffer {
  return Buffer.concat([Buffer.from([cid.length]), cid]);
}

/** The RFC 9146 §5.3 additional data for a tls12_cid record whose DTLSInnerPlaintext has `innerLength` bytes. */
export function cidAdditionalData(version: number, epoch: number, seq: number, cid: Buffer, innerLength: number): Buffer {
  const out = Buffer.alloc(8 + 3 + 2 + 8 + cid.length + 2, 0xff);
  out[8] = CONTENT_TYPE_TLS12_CID;
  out[9] = cid.length;
  out[10] = CONTENT_TYPE_TLS12_CID;
  out.writeUInt16BE(version, 11);
  out.writeUInt16BE(epoch, 13);
  out.writeUIntBE(seq, 15, 6);
  cid.copy(out, 21);
  out.writeUInt16BE(innerLength, 21 + cid.length);
  return out;
}

/** AEAD protection of tls12_cid records in one direction (nonce = fixed_iv ‖ epoch ‖ seq, as for ordinary records). */
export class CidAeadProtection {
  readonly #key: KeyObject;
  readonly #algorithm: CipherCCMTypes;
  readonly #tagLength: number;
  readonly #nonce = Buffer.alloc(12);

  constructor(suiteId: number, encKey: Buffer, fixedIv: Buffer) {
    const p = AEAD_SUITES.get(suiteId);
    if (!p) throw new Error(`suite 0x${suiteId.toString(16)} cannot carry a connection id`);
    this.#algorithm = p.algorithm as CipherCCMTypes; // the CCM typing carries authTagLength for GCM as well
    this.#tagLength = p.tagLength;
    this.#key = createSecretKey(encKey);
    fixedIv.copy(this.#nonce, 0, 0, 4);
  }

  /** Bytes added to the content: real type (1), explicit nonce, tag. */
  get overhead(): number {
    return 1 + EXPLICIT_NONCE + this.#tagLength;
  }

  /** Returns explicit_nonce ‖ ciphertext ‖ tag of DTLSInnerPlaintext{content, type} after `headroom` free bytes. */
  seal(version: number, epoch: number, seq: number, cid: Buffer, type: number, content: Buffer, headroom: number): Buffer {
    const inner = Buffer.allocUnsafe(content.length + 1);
    content.copy(inner);
    inner[content.length] = type;
    const out = Buffer.allocUnsafe(headroom + EXPLICIT_NONCE + inner.length + this.#tagLength);
    out.writeUInt16BE(epoch, headroom);
    out.writeUIntBE(seq, headroom + 2, 6);
    out.copy(this.#nonce, 4, headroom, headroom + EXPLICIT_NONCE);
    const cipher = createCipheriv(this.#algorithm, this.#key, this.#nonce, { authTagLength: this.#tagLength });
    cipher.setAAD(cidAdditionalData(version, epoch, seq, cid, inner.length), { plaintextLength: inner.length });
    let o = headroom + EXPLICIT_NONCE;
    o += cipher.update(inner).copy(out, o);
    o += cipher.final().copy(out, o);
    cipher.getAuthTag().copy(out, o);
    return out;
  }

  /** Verifies and decrypts; returns the real content type and content. Throws bad_record_mac on any failure. */
  open(version: number, epoch: number, seq: number, cid: Buffer, fragment: Buffer): { type: number; content: Buffer } {
    const ctLen = fragment.length - EXPLICIT_NONCE - this.#tagLength;
    if (ctLen < 1) throw new TlsAlert(AlertDescription.bad_record_mac, 'tls12_cid record too short');
    fragment.copy(this.#nonce, 4, 0, EXPLICIT_NONCE);
    const decipher = createDecipheriv(this.#algorithm, this.#key, this.#nonce, { authTagLength: this.#tagLength });
    decipher.setAuthTag(fragment.subarray(EXPLICIT_NONCE + ctLen));
    decipher.setAAD(cidAdditionalData(version, epoch, seq, cid, ctLen), { plaintextLength: ctLen });
    let inner: Buffer;
    try {
      const pt = decipher.update(fragment.subarray(EXPLICIT_NONCE, EXPLICIT_NONCE + ctLen));
      const fin = decipher.final();
      inner = fin.length === 0 ? pt : Buffer.concat([pt, fin]);
    } catch {
      throw new TlsAlert(AlertDescription.bad_record_mac, 'tls12_cid record failed authentication');
    }
    // The real type is the last non-zero byte; everything after it is padding.
    let i = inner.length - 1;
    while (i >= 0 && inner[i] === 0) i--;
    if (i < 0) throw new TlsAlert(AlertDescription.unexpected_message, 'DTLSInnerPlaintext without a content type');
    return { type: inner[i], content: inner.subarray(0, i) };
  }
}
