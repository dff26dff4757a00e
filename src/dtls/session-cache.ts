/**
 * Server-side session cache for resumption by session id (RFC 5246 §7.3, RFC 6347 §4.2): what an abbreviated
 * handshake needs to rebuild keys (master secret, suite, extended_master_secret flag) and who the peer was (PSK
 * identity or verified certificate chain). Bounded: the oldest entry goes when full; entries expire after a
 * lifetime counted from the full handshake that created them (a resumption does not extend it).
 *
 * With a `shared` cache (session-store.ts: Redis, sealed) every entry is also written there, with the same expiry,
 * and an id this process does not know is fetched from it first (`fetch`): any gateway node resumes any session.
 */
import type { X509Certificate } from 'node:crypto';
import { publicRandomBytes } from '../tls/random.ts';

export const SESSION_ID_LENGTH = 32;

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

/** The resumption cache the gateway nodes of a deployment share (session-store.ts). */
export interface SharedSessionCache {
  put(id: Buffer, entry: CachedSession): void;
  remove(id: Buffer): void;
  /** The entry for `id`, undefined when there is none (or the store cannot be reached). */
  fetch(id: Buffer): Promise<CachedSession | undefined>;
}

/**
 * What the cache holds per session (a server holds one for each of its sessions): the master secret and the key
 * fingerprint in one latin1 string, made Buffers only when an entry is read; keyed by the id's bytes, latin1 too.
 */
interface Entry extends Omit<CachedSession, 'masterSecret' | 'pskHash' | 'pskIdentity'> {
  /** master secret ‖ PSK fingerprint, latin1: a short string costs less than a Buffer */
  secrets: string;
  /** always present (undefined for certificate sessions): a field added after the literal would cost a property array */
  pskIdentity: string | undefined;
}

const MASTER_SECRET_LENGTH = 48;

export class SessionCache {
  readonly #max: number;
  readonly #lifetimeMs: number;
  readonly #shared: SharedSessionCache | undefined;
  /** Insertion order = age order, so the first key is the oldest. */
  readonly #entries = new Map<string, Entry>();

  constructor(maxEntries: number, lifetimeMs: number, shared?: SharedSessionCache) {
    this.#max = maxEntries;
    this.#lifetimeMs = lifetimeMs;
    this.#shared = shared;
  }

  /** Whether `id` should be fetched from the shared cache before a ClientHello offering it is answered. */
  wantsFetch(id: Buffer, now = Date.now()): boolean {
    return this.#shared !== undefined && this.#max > 0 && id.length === SESSION_ID_LENGTH && this.get(id, now) === undefined;
  }

  /** Fetches `id` from the shared cache into this one; true when it is now here. */
  async fetch(id: Buffer): Promise<boolean> {
    const e = await this.#shared?.fetch(id);
    if (!e || e.expiresAt <= Date.now() || e.masterSecret.length !== MASTER_SECRET_LENGTH) return false;
    this.#insert(id, e);
    return true;
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
    const entry = { ...s, expiresAt: now + this.#lifetimeMs };
    this.#insert(id, entry);
    this.#shared?.put(id, entry);
  }

  #insert(id: Buffer, c: CachedSession): void {
    const key = id.toString('latin1');
    this.#entries.delete(key);
    while (this.#entries.size >= this.#max) this.#entries.delete(this.#entries.keys().next().value!);
    const entry: Entry = {
      secrets: (c.pskHash ? Buffer.concat([c.masterSecret, c.pskHash]) : c.masterSecret).toString('latin1'),
      suiteId: c.suiteId,
      extendedMasterSecret: c.extendedMasterSecret,
      peerCertificates: c.peerCertificates,
      expiresAt: c.expiresAt,
      pskIdentity: c.pskIdentity,
    };
    this.#entries.set(key, entry);
  }

  /** The live entry for `id`, or undefined (unknown, expired — then removed — or an id of the wrong size). */
  get(id: Buffer, now = Date.now()): CachedSession | undefined {
    if (id.length !== SESSION_ID_LENGTH) return undefined;
    const key = id.toString('latin1');
    const e = this.#entries.get(key);
    if (!e) return undefined;
    if (e.expiresAt <= now) {
      this.#entries.delete(key);
      return undefined;
    }
    const { secrets: text, pskIdentity, ...rest } = e;
    const secrets = Buffer.from(text, 'latin1');
    const c: CachedSession = { ...rest, masterSecret: secrets.subarray(0, MASTER_SECRET_LENGTH) };
    if (pskIdentity !== undefined) c.pskIdentity = pskIdentity;
    if (secrets.length > MASTER_SECRET_LENGTH) c.pskHash = secrets.subarray(MASTER_SECRET_LENGTH);
    return c;
  }

  delete(id: Buffer): void {
    this.#entries.delete(id.toString('latin1'));
    this.#shared?.remove(id);
  }
}
