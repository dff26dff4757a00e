/**
 * Generic AES-AEAD record protection for TLS 1.2 (RFC 5246 §6.2.3.3): nonce = fixed_iv(4) || explicit_nonce(8),
 * explicit nonce = record sequence number (RFC 6655 §3 / RFC 5288 §3), AAD = seq || type || version || length.
 */
import { createCipheriv, createDecipheriv } from 'node:crypto';
import type { CipherCCMTypes, CipherGCMTypes, KeyObject } from 'node:crypto';
import { AlertDescription, TlsAlert } from '../alert.ts';
import type { RecordProtection } from './types.ts';
import { writeAdditionalData } from './types.ts';
import { makeKey, type KeyHolder } from './cipher-keys.ts';

const EXPLICIT_NONCE = 8;
/**
 * Nonce and AAD scratch shared by every protection: filled and consumed synchronously inside one seal or open, so
 * an idle session (of which a server holds thousands) carries no buffers of its own for them.
 */
const NONCE = Buffer.alloc(12);
const AAD = Buffer.alloc(13);

/** A suite's algorithm and tag length: one object per suite, shared by every protection of it. */
interface AeadMode {
  algorithm: CipherCCMTypes | CipherGCMTypes;
  tagLength: number;
}
const MODES = new Map<string, AeadMode>();

function aeadMode(algorithm: CipherCCMTypes | CipherGCMTypes, tagLength: number): AeadMode {
  const name = `${algorithm}/${tagLength}`;
  let mode = MODES.get(name);
  if (!mode) MODES.set(name, (mode = Object.freeze({ algorithm, tagLength })));
  return mode;
}

/**
 * One direction of one session, so a server holds two per idle session: four fields. The key is a KeyObject only while
 * the session is in use (cipher-keys.ts); fixed_iv is a signed 32-bit number, which V8 keeps inside the object rather
 * than in a heap number of its own.
 */
export class AeadProtection implements RecordProtection, KeyHolder {
  private readonly mode: AeadMode;
  /** the key bytes as latin1 */
  private readonly secret: string;
  private cipherKey: KeyObject | undefined;
  private readonly fixedIv: number;

  constructor(algorithm: CipherCCMTypes | CipherGCMTypes, tagLength: number, encKey: Buffer, fixedIv: Buffer) {
    this.mode = aeadMode(algorithm, tagLength);
    this.secret = encKey.toString('latin1');
    this.fixedIv = fixedIv.readInt32BE(0);
  }

  dropKeys(): void {
    this.cipherKey = undefined;
  }

  private key(): KeyObject {
    return (this.cipherKey ??= makeKey(this, this.secret));
  }

  seal(seq: Buffer, type: number, version: number, plaintext: Buffer, headroom: number): Buffer {
    const { algorithm, tagLength } = this.mode;
    const len = plaintext.length;
    const out = Buffer.allocUnsafe(headroom + EXPLICIT_NONCE + len + tagLength);
    seq.copy(out, headroom, 0, 8);
    NONCE.writeInt32BE(this.fixedIv, 0);
    seq.copy(NONCE, 4, 0, 8);
    writeAdditionalData(AAD, seq, type, version, len);
    // The options object is typed per-mode in @types/node; authTagLength is accepted by both CCM and GCM.
    const cipher = createCipheriv(algorithm as CipherCCMTypes, this.key(), NONCE, {
      authTagLength: tagLength,
    });
    cipher.setAAD(AAD, { plaintextLength: len });
    let o = headroom + EXPLICIT_NONCE;
    o += cipher.update(plaintext).copy(out, o);
    o += cipher.final().copy(out, o);
    cipher.getAuthTag().copy(out, o);
    return out;
  }

  open(seq: Buffer, type: number, version: number, fragment: Buffer): Buffer {
    const { algorithm, tagLength } = this.mode;
    const ctLen = fragment.length - EXPLICIT_NONCE - tagLength;
    if (ctLen < 0) throw new TlsAlert(AlertDescription.bad_record_mac, 'record too short for AEAD');
    NONCE.writeInt32BE(this.fixedIv, 0);
    fragment.copy(NONCE, 4, 0, EXPLICIT_NONCE);
    writeAdditionalData(AAD, seq, type, version, ctLen);
    const decipher = createDecipheriv(algorithm as CipherCCMTypes, this.key(), NONCE, {
      authTagLength: tagLength,
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
