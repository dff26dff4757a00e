/**
 * Connection ID for DTLS 1.2 (RFC 9146): the connection_id extension (type 54), and record protection for the
 * tls12_cid record (content type 25), whose plaintext is a DTLSInnerPlaintext (content ‖ real type ‖ zero padding)
 * and whose AEAD additional data is, per §5.3:
 *
 *   seq_num_placeholder (8 × 0xff) ‖ tls12_cid ‖ cid_length ‖ tls12_cid ‖ version ‖ epoch ‖ sequence_number ‖ cid
 *   ‖ length_of_DTLSInnerPlaintext
 *
 * For the CBC-SHA256 suite (MAC-then-encrypt, §5.1) the same bytes, followed by the DTLSInnerPlaintext, are the
 * HMAC input; the record is then IV ‖ CBC(inner ‖ MAC ‖ padding) as in RFC 5246 §6.2.3.2.
 */
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, randomFillSync, timingSafeEqual } from 'node:crypto';
import type { CipherCCMTypes, KeyObject } from 'node:crypto';
import { AlertDescription, TlsAlert } from '../tls/alert.ts';
import type { CipherSuite } from '../tls/suites/index.ts';
import { makeKey, type KeyHolder } from '../tls/suites/cipher-keys.ts';

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

const CBC_SHA256_SUITES = new Set([0x00ae]); // TLS_PSK_WITH_AES_128_CBC_SHA256

export function suiteSupportsCid(suiteId: number): boolean {
  return AEAD_SUITES.has(suiteId) || CBC_SHA256_SUITES.has(suiteId);
}

/** Protection of tls12_cid records in one direction. */
export interface CidProtection {
  /** Most bytes `seal` adds to the content (inner type, explicit nonce or IV, tag or MAC and padding). */
  readonly overhead: number;
  /** Returns the protected fragment of DTLSInnerPlaintext{content, type} after `headroom` free bytes. */
  seal(version: number, epoch: number, seq: number, cid: Buffer, type: number, content: Buffer, headroom: number): Buffer;
  /** Verifies and decrypts; returns the real content type and content. Throws bad_record_mac on any failure. */
  open(version: number, epoch: number, seq: number, cid: Buffer, fragment: Buffer): { type: number; content: Buffer };
}

/** The CID protection for one direction of `suite`, from the same key material as its ordinary protection. */
export function createCidProtection(suite: CipherSuite, macKey: Buffer, encKey: Buffer, fixedIv: Buffer): CidProtection {
  if (CBC_SHA256_SUITES.has(suite.id)) return new CidCbcSha256Protection(macKey, encKey);
  return new CidAeadProtection(suite.id, encKey, fixedIv);
}

/** The real type is the last non-zero byte of a DTLSInnerPlaintext; everything after it is padding. */
function splitInner(inner: Buffer): { type: number; content: Buffer } {
  let i = inner.length - 1;
  while (i >= 0 && inner[i] === 0) i--;
  if (i < 0) throw new TlsAlert(AlertDescription.unexpected_message, 'DTLSInnerPlaintext without a content type');
  return { type: inner[i], content: inner.subarray(0, i) };
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

/** Nonce scratch shared by every CID protection: filled and consumed synchronously within one seal or open. */
const NONCE = Buffer.alloc(12);

/**
 * AEAD protection of tls12_cid records in one direction (nonce = fixed_iv ‖ epoch ‖ seq, as for ordinary records).
 * An idle session holds two: the suite's shared parameters, the key bytes (a KeyObject only while in use:
 * src/tls/suites/cipher-keys.ts) and fixed_iv as a signed 32-bit number.
 */
export class CidAeadProtection implements CidProtection, KeyHolder {
  readonly #suite: { algorithm: 'aes-128-ccm' | 'aes-128-gcm'; tagLength: number };
  readonly #secret: string;
  #cipherKey: KeyObject | undefined;
  readonly #fixedIv: number;

  constructor(suiteId: number, encKey: Buffer, fixedIv: Buffer) {
    const p = AEAD_SUITES.get(suiteId);
    if (!p) throw new Error(`suite 0x${suiteId.toString(16)} cannot carry a connection id`);
    this.#suite = p;
    this.#secret = encKey.toString('latin1');
    this.#fixedIv = fixedIv.readInt32BE(0);
  }

  dropKeys(): void {
    this.#cipherKey = undefined;
  }

  #key(): KeyObject {
    return (this.#cipherKey ??= makeKey(this, this.#secret));
  }

  /** Bytes added to the content: real type (1), explicit nonce, tag. */
  get overhead(): number {
    return 1 + EXPLICIT_NONCE + this.#suite.tagLength;
  }

  /** Returns explicit_nonce ‖ ciphertext ‖ tag of DTLSInnerPlaintext{content, type} after `headroom` free bytes. */
  seal(version: number, epoch: number, seq: number, cid: Buffer, type: number, content: Buffer, headroom: number): Buffer {
    const inner = Buffer.allocUnsafe(content.length + 1);
    content.copy(inner);
    inner[content.length] = type;
    // the CCM typing carries authTagLength for GCM as well
    const algorithm = this.#suite.algorithm as CipherCCMTypes;
    const tagLength = this.#suite.tagLength;
    const out = Buffer.allocUnsafe(headroom + EXPLICIT_NONCE + inner.length + tagLength);
    out.writeUInt16BE(epoch, headroom);
    out.writeUIntBE(seq, headroom + 2, 6);
    NONCE.writeInt32BE(this.#fixedIv, 0);
    out.copy(NONCE, 4, headroom, headroom + EXPLICIT_NONCE);
    const cipher = createCipheriv(algorithm, this.#key(), NONCE, { authTagLength: tagLength });
    cipher.setAAD(cidAdditionalData(version, epoch, seq, cid, inner.length), { plaintextLength: inner.length });
    let o = headroom + EXPLICIT_NONCE;
    o += cipher.update(inner).copy(out, o);
    o += cipher.final().copy(out, o);
    cipher.getAuthTag().copy(out, o);
    return out;
  }

  /** Verifies and decrypts; returns the real content type and content. Throws bad_record_mac on any failure. */
  open(version: number, epoch: number, seq: number, cid: Buffer, fragment: Buffer): { type: number; content: Buffer } {
    const algorithm = this.#suite.algorithm as CipherCCMTypes;
    const tagLength = this.#suite.tagLength;
    const ctLen = fragment.length - EXPLICIT_NONCE - tagLength;
    if (ctLen < 1) throw new TlsAlert(AlertDescription.bad_record_mac, 'tls12_cid record too short');
    NONCE.writeInt32BE(this.#fixedIv, 0);
    fragment.copy(NONCE, 4, 0, EXPLICIT_NONCE);
    const decipher = createDecipheriv(algorithm, this.#key(), NONCE, { authTagLength: tagLength });
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
    return splitInner(inner);
  }
}

const BLOCK = 16;
const MAC = 32;

/**
 * AES-128-CBC + HMAC-SHA256 (MAC-then-encrypt) for tls12_cid records, RFC 9146 §5.1. Padding and MAC failures
 * look alike (bad_record_mac) and the MAC is always computed, as in the suite's ordinary protection.
 */
export class CidCbcSha256Protection implements CidProtection {
  readonly #macKey: KeyObject;
  readonly #encKey: KeyObject;
  readonly overhead = 1 + BLOCK + MAC + BLOCK;

  constructor(macKey: Buffer, encKey: Buffer) {
    this.#macKey = createSecretKey(macKey);
    this.#encKey = createSecretKey(encKey);
  }

  seal(version: number, epoch: number, seq: number, cid: Buffer, type: number, content: Buffer, headroom: number): Buffer {
    const inner = Buffer.concat([content, Buffer.from([type])]);
    const mac = createHmac('sha256', this.#macKey)
      .update(cidAdditionalData(version, epoch, seq, cid, inner.length))
      .update(inner)
      .digest();
    const padLen = BLOCK - 1 - ((inner.length + MAC) % BLOCK);
    const out = Buffer.allocUnsafe(headroom + BLOCK + inner.length + MAC + padLen + 1);
    randomFillSync(out, headroom, BLOCK);
    const cipher = createCipheriv('aes-128-cbc', this.#encKey, out.subarray(headroom, headroom + BLOCK)).setAutoPadding(false);
    let o = headroom + BLOCK;
    o += cipher.update(inner).copy(out, o);
    o += cipher.update(mac).copy(out, o);
    o += cipher.update(Buffer.alloc(padLen + 1, padLen)).copy(out, o);
    cipher.final().copy(out, o);
    return out;
  }

  open(version: number, epoch: number, seq: number, cid: Buffer, fragment: Buffer): { type: number; content: Buffer } {
    const n = fragment.length;
    if (n < BLOCK + 48 || n % BLOCK !== 0) throw new TlsAlert(AlertDescription.bad_record_mac, 'bad CBC record length');
    const decipher = createDecipheriv('aes-128-cbc', this.#encKey, fragment.subarray(0, BLOCK)).setAutoPadding(false);
    const dec = decipher.update(fragment.subarray(BLOCK));
    decipher.final();
    const L = dec.length;
    const pad = dec[L - 1];
    // good = 1 iff pad + 1 + MAC < L (at least the inner type byte remains) and every padding byte equals pad.
    let good = ((L - MAC - 2 - pad) >>> 31) ^ 1;
    let diff = 0;
    for (let i = 0; i < Math.min(256, L); i++) {
      const inPad = ((pad - i) >>> 31) ^ 1; // 1 iff i <= pad
      diff |= inPad * (dec[L - 1 - i] ^ pad);
    }
    good &= (diff - 1) >>> 31; // 1 iff diff === 0
    const innerLen = L - MAC - 1 - (pad & -good);
    const mac = createHmac('sha256', this.#macKey)
      .update(cidAdditionalData(version, epoch, seq, cid, innerLen))
      .update(dec.subarray(0, innerLen))
      .digest();
    const macOk = timingSafeEqual(mac, dec.subarray(innerLen, innerLen + MAC)) ? 1 : 0;
    if ((macOk & good) !== 1) throw new TlsAlert(AlertDescription.bad_record_mac, 'tls12_cid record failed authentication');
    return splitInner(dec.subarray(0, innerLen));
  }
}
