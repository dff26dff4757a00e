import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, scrypt, timingSafeEqual, createHash } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { promisify } from 'node:util';

const scryptAsync = promisify(scrypt) as (pw: string, salt: Buffer, len: number, opts: object) => Promise<Buffer>;

/** Keys derived from the one server secret, each for one purpose. */
export interface ServerKeys {
  jwt: Uint8Array;
  pskEncryption: Buffer;
  /** seals accounts' TOTP keys (src/accounts/two-factor/) */
  totpEncryption: Buffer;
  internalToken: string;
  /** seals find queries' nextPageOffset (src/http/paging.ts) */
  pagingOffset: Buffer;
  /** MACs the datagrams between the gateway nodes of a CID-routed cluster (src/dtls/cluster/messages.ts) */
  dtlsCluster: Buffer;
  /** signs export download links (src/monitoring/exports/link.ts) */
  exportDownload: Buffer;
}

export function deriveKeys(secretKey: Buffer, internalTokenOverride = ''): ServerKeys {
  const derive = (info: string) => Buffer.from(hkdfSync('sha256', secretKey, Buffer.alloc(0), info, 32));
  return {
    jwt: new Uint8Array(derive('jwt-hs256')),
    pskEncryption: derive('psk-at-rest'),
    totpEncryption: derive('totp-at-rest'),
    internalToken: internalTokenOverride || derive('internal-token').toString('base64url'),
    pagingOffset: derive('paging-offset'),
    dtlsCluster: derive('dtls-cluster-forwarding'),
    exportDownload: derive('export-download'),
  };
}

/** Encrypts a device key for storage: AES-256-GCM, iv ‖ tag ‖ ciphertext. A KeyObject `key` seals about 3× faster than bytes. */
export function encryptSecret(key: Buffer | KeyObject, plain: Buffer, aad: string): Buffer {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(aad));
  const body = Buffer.concat([c.update(plain), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), body]);
}

export function decryptSecret(key: Buffer | KeyObject, sealed: Buffer, aad: string): Buffer {
  const d = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, 12));
  d.setAAD(Buffer.from(aad));
  d.setAuthTag(sealed.subarray(12, 28));
  return Buffer.concat([d.update(sealed.subarray(28)), d.final()]);
}

const SCRYPT = { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };

/** A slow hash of an account secret: `scrypt$<salt>$<hash>`. */
export async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(secret, salt, 32, SCRYPT);
  return `scrypt$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

export async function verifySecret(secret: string, stored: string): Promise<boolean> {
  const [scheme, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const actual = await scryptAsync(secret, Buffer.from(salt, 'base64url'), expected.length, SCRYPT);
  return timingSafeEqual(actual, expected);
}

export function sha256Hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}
