// People's passwords: scrypt (RFC 7914) with N = 2^17, r = 8, p = 1, a 16-byte salt and a 32-byte key, stored
// as `scrypt$N$r$p$salt$hash` (base64), so the parameters can be raised later and old hashes still check
// (docs/decisions.md, "People's passwords"). One check costs 128 MiB and some 200-400 ms of one libuv thread;
// with the default four threads a burst of sign-ins holds at most 512 MiB.

import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { Counter } from 'prom-client';

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

const PARAMETERS = { N: 2 ** 17, r: 8, p: 1 };
const SALT_BYTES = 16;
const KEY_BYTES = 32;
const MAXMEM = 256 * 1024 * 1024;

/** Password checks run by sign-ins, known address or not (the same count for both keeps their timing alike). */
export const passwordChecks = new Counter({ name: 'gridgate_api_person_password_checks_total', help: "scrypt checks of people's passwords" });

const derive = (password: string, salt: Buffer, length: number, options: ScryptOptions) =>
  new Promise<Buffer>((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, length, { ...options, maxmem: MAXMEM }, (err, key) => (err ? reject(err) : resolve(key)));
  });

/** A new salted hash of `password`. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, KEY_BYTES, PARAMETERS);
  const { N, r, p } = PARAMETERS;
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** Whether `password` is the one `stored` was made from; false for a stored value of another form. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  passwordChecks.inc();
  const parts = stored.split('$');
  const [N, r, p] = parts.slice(1, 4).map(Number);
  if (parts.length !== 6 || parts[0] !== 'scrypt' || ![N, r, p].every(Number.isSafeInteger)) return false;
  const expected = Buffer.from(parts[5], 'base64');
  if (expected.length !== KEY_BYTES) return false;
  const actual = await derive(password, Buffer.from(parts[4], 'base64'), expected.length, { N, r, p });
  return timingSafeEqual(actual, expected);
}

// the hash an address without a password is checked against: the same work as a real check
let dummy: Promise<string> | null = null;

/** A hash of no one's password, computed once. */
export const dummyPasswordHash = (): Promise<string> => (dummy ??= hashPassword(randomBytes(32).toString('base64')));
