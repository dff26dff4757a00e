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

export class AeadProtection implements RecordProtection {
  private readonly key: KeyObject;
  private readonly algorithm: CipherCCMTypes | CipherGCMTypes;
  private readonly ccm: boolean;
  private readonly tagLength: number;
  private readonly nonce = Buffer.alloc(12);
  private readonly aad = Buffer.alloc(13);

  constructor(algorithm: CipherCCMTypes | CipherGCMTypes, tagLength: number, encKey: Buffer, fixedIv: Buffer) {
    this.algorithm = algorithm;
    this.ccm = algorithm.endsWith('-ccm');
    this.tagLength = tagLength;
    this.key = createSecretKey(encKey);
    fixedIv.copy(this.nonce, 0, 0, 4);
  }

  seal(seq: Buffer, type: number, version: number, plaintext: Buffer, headroom: number): Buffer {
    const len = plaintext.length;
    const out = Buffer.allocUnsafe(headroom + EXPLICIT_NONCE + len + this.tagLength);
    seq.copy(out, headroom, 0, 8);
    seq.copy(this.nonce, 4, 0, 8);
    writeAdditionalData(this.aad, seq, type, version, len);
    // The options object is typed per-mode in @types/node; authTagLength is accepted by both CCM and GCM.
    const cipher = createCipheriv(this.algorithm as CipherCCMTypes, this.key, this.nonce, {
      authTagLength: this.tagLength,
    });
    cipher.setAAD(this.aad, { plaintextLength: len });
    let o = headroom + EXPLICIT_NONCE;
    o += cipher.update(plaintext).copy(out, o);
    o += cipher.final().copy(out, o);
    cipher.getAuthTag().copy(out, o);
    return out;
  }

  open(seq: Buffer, type: number, version: number, fragment: Buffer): Buffer {
    const ctLen = fragment.length - EXPLICIT_NONCE - this.tagLength;
    if (ctLen < 0) throw new TlsAlert(AlertDescription.bad_record_mac, 'record too short for AEAD');
    fragment.copy(this.nonce, 4, 0, EXPLICIT_NONCE);
    writeAdditionalData(this.aad, seq, type, version, ctLen);
    const decipher = createDecipheriv(this.algorithm as CipherCCMTypes, this.key, this.nonce, {
      authTagLength: this.tagLength,
    });
    decipher.setAuthTag(fragment.subarray(EXPLICIT_NONCE + ctLen));
    decipher.setAAD(this.aad, { plaintextLength: ctLen });
    try {
      const pt = decipher.update(fragment.subarray(EXPLICIT_NONCE, EXPLICIT_NONCE + ctLen));
      const fin = decipher.final();
      return fin.length === 0 ? pt : Buffer.concat([pt, fin]);
    } catch {
      throw new TlsAlert(AlertDescription.bad_record_mac, 'AEAD authentication failed');
    }
  }
}
