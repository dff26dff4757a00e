// Time-based one-time passwords as RFC 6238 defines them (HOTP of RFC 4226 over 30 s steps), with
// node:crypto only. An authenticator app shows SHA-1, 6 digits, 30 s; the other hashes and digit
// counts exist for RFC 6238's own test vectors. Base32 (RFC 4648) is the form keyuris carry keys in.

import { createHmac, timingSafeEqual } from 'node:crypto';

export type TotpHash = 'sha1' | 'sha256' | 'sha512';

export const TOTP_STEP_SECONDS = 30;
export const TOTP_DIGITS = 6;
/** steps either side of now a code is accepted for: a phone's clock a little off, a code typed as it changed */
export const TOTP_WINDOW = 1;

/** The HOTP value (RFC 4226 §5.3, dynamic truncation) of `counter`, zero-padded to `digits`. */
export function hotp(key: Buffer, counter: bigint, digits = TOTP_DIGITS, hash: TotpHash = 'sha1'): string {
  const message = Buffer.alloc(8);
  message.writeBigUInt64BE(counter);
  const mac = createHmac(hash, key).update(message).digest();
  const offset = mac[mac.length - 1] & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** digits).padStart(digits, '0');
}

/** The time step of a moment (seconds since the epoch). */
export const totpStep = (unixSeconds: number): bigint => BigInt(Math.floor(unixSeconds / TOTP_STEP_SECONDS));

/** The TOTP code of a moment. */
export function totp(key: Buffer, unixSeconds: number, digits = TOTP_DIGITS, hash: TotpHash = 'sha1'): string {
  return hotp(key, totpStep(unixSeconds), digits, hash);
}

/**
 * The step a code belongs to, searched within ±TOTP_WINDOW of `unixSeconds`; null when it matches none.
 * The caller refuses a step it has already accepted (a replayed code).
 */
export function matchTotp(key: Buffer, code: string, unixSeconds: number): bigint | null {
  if (!/^\d{6}$/.test(code)) return null;
  const now = totpStep(unixSeconds);
  let found: bigint | null = null;
  // every step of the window is computed, matched or not, so the answer's timing does not tell which one matched
  for (let d = -TOTP_WINDOW; d <= TOTP_WINDOW; d++) {
    const step = now + BigInt(d);
    if (timingSafeEqual(Buffer.from(hotp(key, step)), Buffer.from(code)) && found === null) found = step;
  }
  return found;
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32, without padding (as otpauth keyuris carry it). */
export function base32Encode(data: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of data) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** RFC 4648 base32 to bytes; padding and case are ignored. Throws on a character outside the alphabet. */
export function base32Decode(text: string): Buffer {
  const bytes: number[] = [];
  let bits = 0;
  let value = 0;
  for (const ch of text.toUpperCase().replace(/=+$/, '')) {
    const index = BASE32.indexOf(ch);
    if (index < 0) throw new Error(`not base32: ${ch}`);
    value = ((value << 5) | index) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      bytes.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(bytes);
}
