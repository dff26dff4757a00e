/**
 * Server-side session cache for resumption by session id (RFC 5246 §7.3, RFC 6347 §4.2): what an abbreviated
 * handshake needs to rebuild keys (master secret, suite, extended_master_secret flag) and who the peer was (PSK
 * identity or verified certificate chain). Bounded: the oldest entry goes when full; entries expire after a
 * lifetime counted from the full handshake that created them (a resumption does not extend it).
 */
import type { X509Certificate } from 'node:crypto';
import { publicRandomBytes } from '../tls/random.ts';

export const SESSION_ID_LENGTH = 32;

/** Entries live for hours: their bytes (master secret and key fingerprint together) get memory of their own rather than a slice of a shared pool slab. */
function owned(b: Buffer): Buffer {
  const copy = Buffer.alloc(b.length);
  b.copy(copy);
  return copy;
}

export interface CachedSession {
  masterSecret: Buffer;
  suiteId: number;
  extendedMasterSecret: boolean;
  pskIdentity?: string;
  /** PSK sessions: a fingerprint of the key, so a resumption can see the identity's key is still the same. */
  pskHash?: Buffer;
  peerCertificates: X509Certificate[];
  expiresAt: number;
}

export class SessionCache {
  readonly #max: number;
  readonly #lifetimeMs: number;
  /** Insertion order = age order, so the first key is the oldest. */
  readonly #entries = new Map<string, CachedSession>();

  constructor(maxEntries: number, lifetimeMs: number) {
    this.#max = maxEntries;
    this.#lifetimeMs = lifetimeMs;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** A fresh random session id (the ServerHello of every full handshake carries one); a slice of a shared pool. */
  newId(): Buffer {
    return publicRandomBytes(SESSION_ID_LENGTH);
  }

  store(id: Buffer, s: Omit<CachedSession, 'expiresAt'>, now = Date.now()): void {
    if (this.#max <= 0 || id.length === 0) return;
    const key = id.toString('hex');
    this.#entries.delete(key);
    while (this.#entries.size >= this.#max) this.#entries.delete(this.#entries.keys().next().value!);
    const secrets = owned(s.pskHash ? Buffer.concat([s.masterSecret, s.pskHash]) : s.masterSecret);
    const masterSecret = secrets.subarray(0, s.masterSecret.length);
    this.#entries.set(key, { ...s, masterSecret, ...(s.pskHash ? { pskHash: secrets.subarray(s.masterSecret.length) } : {}), expiresAt: now + this.#lifetimeMs });
  }

  /** The live entry for `id`, or undefined (unknown, expired — then removed — or an id of the wrong size). */
  get(id: Buffer, now = Date.now()): CachedSession | undefined {
    if (id.length !== SESSION_ID_LENGTH) return undefined;
    const key = id.toString('hex');
    const e = this.#entries.get(key);
    if (!e) return undefined;
    if (e.expiresAt <= now) {
      this.#entries.delete(key);
      return undefined;
    }
    return e;
  }

  delete(id: Buffer): void {
    this.#entries.delete(id.toString('hex'));
  }
}
