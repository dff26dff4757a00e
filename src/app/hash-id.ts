import { randomBytes, randomFillSync } from 'node:crypto';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

// ids are made on every device request: draw random bytes from a pool, not one system call each
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomByte(): number {
  if (poolOffset >= pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++];
}

/** A short random lowercase alphanumeric identifier (10 characters by default, ~51 bits): not guessable from neighbours. */
export function newHashId(length = 10): string {
  let out = '';
  for (let i = 0; i < length; i++) {
    let b = randomByte();
    // 252 = 7 * 36: rejection keeps the distribution uniform
    while (b >= 252) b = randomByte();
    // a leading letter keeps ids from looking like numbers in spreadsheets and query strings
    out += i === 0 ? ALPHABET[b % 26] : ALPHABET[b % 36];
  }
  return out;
}

/** A long random secret (claim tokens, webhook secrets, assertions): 32 bytes, base64url. */
export function newSecret(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}
