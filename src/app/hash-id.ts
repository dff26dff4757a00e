import { randomBytes } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** A short random lowercase alphanumeric identifier (10 characters, ~51 bits): not guessable from neighbours. */
export function newHashId(length = 10): string {
  const bytes = randomBytes(length);
  let out = '';
  // 252 = 7 * 36: rejection keeps the distribution uniform
  for (let i = 0; i < length; i++) {
    let b = bytes[i];
    while (b >= 252) b = randomBytes(1)[0];
    out += ALPHABET[b % 36];
  }
  // a leading letter keeps ids from looking like numbers in spreadsheets and query strings
  if (out[0] >= '0' && out[0] <= '9') out = ALPHABET[bytes[0] % 26] + out.slice(1);
  return out;
}

/** A long random secret (claim tokens, webhook secrets, assertions): 32 bytes, base64url. */
export function newSecret(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}
