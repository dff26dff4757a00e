/**
 * TLS_PSK_WITH_AES_128_CBC_SHA256 (0x00AE), RFC 5487: AES-128-CBC, HMAC-SHA256, MAC-then-encrypt (RFC 5246 §6.2.3.2)
 * with a random explicit IV per record. encrypt_then_mac (RFC 7366) is not negotiated.
 *
 * Padding errors and MAC errors both surface as bad_record_mac, and the MAC is always computed (over the
 * data with zero-length padding assumed when padding is bad) so the two cases take comparable paths.
 * Residual Lucky13-style timing differences in the HMAC length remain (see report).
 */
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, randomFillSync, timingSafeEqual } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { AlertDescription, TlsAlert } from '../alert.ts';
import type { CipherSuite, RecordProtection } from './types.ts';
import { writeAdditionalData } from './types.ts';

const BLOCK = 16;
const MAC = 32;
const PADDINGS: Buffer[] = Array.from({ length: BLOCK }, (_, p) => Buffer.alloc(p + 1, p));

class CbcSha256Protection implements RecordProtection {
  private readonly macKey: KeyObject;
  private readonly encKey: KeyObject;
  private readonly aad = Buffer.alloc(13);

  constructor(macKey: Buffer, encKey: Buffer) {
    this.macKey = createSecretKey(macKey);
    this.encKey = createSecretKey(encKey);
  }

  seal(seq: Buffer, type: number, version: number, plaintext: Buffer, headroom: number): Buffer {
    const len = plaintext.length;
    const padLen = BLOCK - 1 - ((len + MAC) % BLOCK);
    const out = Buffer.allocUnsafe(headroom + BLOCK + len + MAC + padLen + 1);
    randomFillSync(out, headroom, BLOCK);
    const iv = out.subarray(headroom, headroom + BLOCK);
    writeAdditionalData(this.aad, seq, type, version, len);
    const mac = createHmac('sha256', this.macKey).update(this.aad).update(plaintext).digest();
    const cipher = createCipheriv('aes-128-cbc', this.encKey, iv).setAutoPadding(false);
    let o = headroom + BLOCK;
    o += cipher.update(plaintext).copy(out, o);
    o += cipher.update(mac).copy(out, o);
    o += cipher.update(PADDINGS[padLen]).copy(out, o);
    cipher.final().copy(out, o);
    return out;
  }

  open(seq: Buffer, type: number, version: number, fragment: Buffer): Buffer {
    const n = fragment.length;
    // IV + at least one block holding MAC(32) + padding_length(1), rounded up to the block size.
    if (n < BLOCK + 48 || n % BLOCK !== 0) throw new TlsAlert(AlertDescription.bad_record_mac, 'bad CBC record length');
    const decipher = createDecipheriv('aes-128-cbc', this.encKey, fragment.subarray(0, BLOCK)).setAutoPadding(false);
    const dec = decipher.update(fragment.subarray(BLOCK));
    decipher.final();
    const L = dec.length;
    const pad = dec[L - 1];
    // good = 1 iff pad + 1 + MAC <= L and every padding byte equals pad; computed without early exits.
    let good = ((L - MAC - 1 - pad) >>> 31) ^ 1;
    const checkLen = Math.min(256, L);
    let diff = 0;
    for (let i = 0; i < checkLen; i++) {
      const inPad = ((pad - i) >>> 31) ^ 1; // 1 iff i <= pad
      diff |= inPad * (dec[L - 1 - i] ^ pad);
    }
    good &= (diff - 1) >>> 31; // 1 iff diff === 0
    const effPad = pad & -good;
    const ptLen = L - MAC - 1 - effPad;
    writeAdditionalData(this.aad, seq, type, version, ptLen);
    const mac = createHmac('sha256', this.macKey).update(this.aad).update(dec.subarray(0, ptLen)).digest();
    const macOk = timingSafeEqual(mac, dec.subarray(ptLen, ptLen + MAC)) ? 1 : 0;
    if ((macOk & good) !== 1) throw new TlsAlert(AlertDescription.bad_record_mac, 'bad record MAC');
    return dec.subarray(0, ptLen);
  }
}

export const TLS_PSK_WITH_AES_128_CBC_SHA256: CipherSuite = {
  id: 0x00ae,
  name: 'TLS_PSK_WITH_AES_128_CBC_SHA256',
  macKeyLength: MAC,
  encKeyLength: 16,
  fixedIvLength: 0,
  maxOverhead: BLOCK + MAC + BLOCK,
  createProtection: (macKey, encKey) => new CbcSha256Protection(macKey, encKey),
};
