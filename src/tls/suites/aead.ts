/**
 * Generic AES-AEAD record protection for TLS 1.2 (RFC 5246 §6.2.3.3): nonce = fixed_iv(4) || explicit_nonce(8),
 * explicit nonce = record sequence number (RFC 6655 §3 / RFC 5288 §3), AAD = seq || type || version || length.
 */
import { createCipheriv, createDecipheriv, createSecretKey } from 'node:crypto';
import type { CipherCCMTypes, CipherGCMTypes, KeyObject } from 'node:crypto';
import { AlertDescription, TlsAlert } from '../alert.ts';
import type { RecordProtection } from './types.ts';
import { writeAdditionalData } from './types.ts';

const EXPLICIT_NONCE = 8;
/**
 * Nonce and AAD scratch shared by every protection: filled and consumed synchronously inside one seal or open, so
 * an idle session (of which a server holds thousands) carries no buffers of its own for them.
 */
const NONCE = Buffer.alloc(12);
const AAD = Buffer.alloc(13);

export class AeadProtection implements RecordProtection {
  private readonly key: KeyObject;
  private readonly algorithm: CipherCCMTypes | CipherGCMTypes;
  private readonly ccm: boolean;
  private readonly tagLength: number;
  /** fixed_iv (4 bytes) as a number */
  private readonly fixedIv: number;

  constructor(algorithm: CipherCCMTypes | CipherGCMTypes, tagLength: number, encKey: Buffer, fixedIv: Buffer) {
    this.algorithm = algorithm;
    this.ccm = algorithm.endsWith('-ccm');
    this.tagLength = tagLength;
    this.key = createSecretKey(encKey);
    this.fixedIv = fixedIv.readUInt32BE(0);
  }

  seal(seq: Buffer, type: number, version: number, plaintext: Buffer, headroom: number): Buffer {
    const len = plaintext.length;
    const out = Buffer.allocUnsafe(headroom + EXPLICIT_NONCE + len + this.tagLength);
    seq.copy(out, headroom, 0, 8);
    NONCE.writeUInt32BE(this.fixedIv, 0);
    seq.copy(NONCE, 4, 0, 8);
    writeAdditionalData(AAD, seq, type, version, len);
    // The options object is typed per-mode in @types/node; authTagLength is accepted by both CCM and GCM.
    const cipher = createCipheriv(this.algorithm as CipherCCMTypes, this.key, NONCE, {
      authTagLength: this.tagLength,
    });
    cipher.setAAD(AAD, { plaintextLength: len });
    let o = headroom + EXPLICIT_NONCE;
    o += cipher.update(plaintext).copy(out, o);
    o += cipher.final().copy(out, o);
    cipher.getAuthTag().copy(out, o);
    return out;
  }

  open(seq: Buffer, type: number, version: number, fragment: Buffer): Buffer {
    const ctLen = fragment.length - EXPLICIT_NONCE - this.tagLength;
    if (ctLen < 0) throw new TlsAlert(AlertDescription.bad_record_mac, 'record too short for AEAD');
    NONCE.writeUInt32BE(this.fixedIv, 0);
    fragment.copy(NONCE, 4, 0, EXPLICIT_NONCE);
    writeAdditionalData(AAD, seq, type, version, ctLen);
    const decipher = createDecipheriv(this.algorithm as CipherCCMTypes, this.key, NONCE, {
      authTagLength: this.tagLength,
    });
    decipher.setAuthTag(fragment.subarray(EXPLICIT_NONCE + ctLen));
    decipher.setAAD(AAD, { plaintextLength: ctLen });
    try {
      const pt = decipher.update(fragment.subarray(EXPLICIT_NONCE, EXPLICIT_NONCE + ctLen));
      const fin = decipher.final();
      return fin.length === 0 ? pt : Buffer.concat([pt, fin]);
    } catch {
      throw new TlsAlert(AlertDescription.bad_record_mac, 'AEAD authentication failed');
    }
  }
}
