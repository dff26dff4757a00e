/**
 * Where DTLS state outlives a process: established sessions (session-state.ts) and the resumption cache
 * (session-cache.ts), in Redis, shared by every gateway node of a deployment.
 *
 * Everything is sealed with AES-256-GCM under a key derived from SECRET_KEY (HKDF, purpose 'dtls-session-state'),
 * the Redis key name as additional data: no key material is in Redis in clear, and a blob cannot be moved to another
 * session's key. Sealing does not give freshness: someone who can write Redis can put back an older blob of the same
 * session (its replay window then goes back too); that is the trust placed in Redis.
 *
 * Keys, each a hash tag of its own so they spread over a Redis Cluster:
 *   <prefix>{dtls:c<cid hex>} or <prefix>{dtls:a<address>:<port>}   hash  k: keys (sealed), s: motion (sealed),
 *                                                                         p: first write sequence number not leased
 *   <prefix>{dtls-sid:<session id hex>}                                 string: a resumption cache entry (sealed)
 * A session's hash expires when the session would have gone idle; a cache entry when its lifetime ends.
 */
import { createHash, createSecretKey, hkdfSync } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { decryptSecret, encryptSecret } from '../app/keys.ts';
import { Cluster } from 'ioredis';
import type { Redis } from '../app/redis.ts';
import type { CachedSession, SharedSessionCache } from '../dtls/session-cache.ts';
import { WRITE_LEASE, decodeCached, decodeKeys, decodeMotion, encodeCached, encodeKeys, encodeMotion } from '../dtls/session-state.ts';
import type { SessionKeys, SessionMotion } from '../dtls/session-state.ts';
import type { KeptStart } from '../dtls/session.ts';
import type { SessionKeeper } from '../dtls/session-keeper.ts';

export type { SessionKeeper } from '../dtls/session-keeper.ts';

// the state and a lease of sequence numbers (p: the first number nobody leased yet) in one step
const TAKE = `local v = redis.call('HMGET', KEYS[1], 'k', 's', 'p')
if not v[1] or not v[2] or not v[3] then return nil end
return {v[1], v[2], redis.call('HINCRBY', KEYS[1], 'p', ARGV[1])}`;

// a lease renewed only by the holder of the one before: p still where that lease ended
const RENEW = `local p = redis.call('HGET', KEYS[1], 'p')
if not p then return -1 end
if p ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'p', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1`;

const sha1 = (script: string) => createHash('sha1').update(script).digest('hex');
const SCRIPTS = { take: { lua: TAKE, sha: sha1(TAKE) }, renew: { lua: RENEW, sha: sha1(RENEW) } };

/** Sessions written per pipeline on shutdown. */
const SAVE_CHUNK = 5_000;

export interface DtlsStateStoreOptions {
  /** The deployment's prefix for Redis keys (e.g. 'gridgate:<queue name>:'). */
  prefix: string;
  secretKey: Buffer;
  /** Kept sessions expire this long after their last authentic record (the server's idle timeout). */
  idleTimeoutMs: number;
  /** Called with each failed Redis write (the caller logs an outage once). */
  onError?(err: Error): void;
}

export class DtlsStateStore implements SessionKeeper, SharedSessionCache {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #key: KeyObject;
  readonly #idleMs: number;
  readonly #onError: (err: Error) => void;
  /** Sealed keys of sessions whose handshake-time write failed: saveAll writes them with their motion. */
  readonly #unsaved = new Map<string, Buffer>();

  constructor(redis: Redis, o: DtlsStateStoreOptions) {
    this.#redis = redis;
    this.#prefix = o.prefix;
    this.#key = createSecretKey(Buffer.from(hkdfSync('sha256', o.secretKey, Buffer.alloc(0), 'dtls-session-state', 32)));
    this.#idleMs = o.idleTimeoutMs;
    this.#onError = o.onError ?? (() => undefined);
  }

  sessionKey(ref: string): string {
    return `${this.#prefix}{dtls:${ref}}`;
  }

  #cacheKey(id: Buffer): string {
    return `${this.#prefix}{dtls-sid:${id.toString('hex')}}`;
  }

  #ttl(lastActive: number): number {
    return Math.max(1, lastActive + this.#idleMs - Date.now());
  }

  #sealMotion(name: string, motion: SessionMotion): Buffer {
    return encryptSecret(this.#key, encodeMotion(motion), `${name}:s`);
  }

  established(ref: string, keys: SessionKeys, motion: SessionMotion): number {
    const name = this.sessionKey(ref);
    const k = encryptSecret(this.#key, encodeKeys(keys), `${name}:k`);
    const leaseEnd = motion.writeSeq + WRITE_LEASE;
    this.#unsaved.set(ref, k);
    this.#redis
      .multi()
      .del(name)
      .hset(name, 'k', k, 's', this.#sealMotion(name, motion), 'p', leaseEnd)
      .pexpire(name, this.#ttl(motion.lastActive))
      .exec()
      .then((res) => {
        const failed = res?.find(([err]) => err)?.[0];
        if (failed) throw failed;
        if (this.#unsaved.get(ref) === k) this.#unsaved.delete(ref);
      })
      .catch((err: Error) => this.#onError(err));
    return leaseEnd;
  }

  async renew(ref: string, leaseEnd: number, motion: SessionMotion): Promise<number | null> {
    const name = this.sessionKey(ref);
    const next = leaseEnd + WRITE_LEASE;
    const done = Number(await this.#run(SCRIPTS.renew, [name, leaseEnd, this.#sealMotion(name, motion), next, this.#ttl(motion.lastActive)]));
    if (done === 1) return next;
    if (done === 0) return null;
    const k = this.#unsaved.get(ref);
    // nothing kept: nobody else can load it; and when its handshake-time write failed, now is the time
    if (!k) return Infinity;
    const res = await this.#redis.multi().hset(name, 'k', k, 's', this.#sealMotion(name, motion), 'p', next).pexpire(name, this.#ttl(motion.lastActive)).exec();
    const failed = res?.find(([err]) => err)?.[0];
    if (failed) throw failed;
    this.#unsaved.delete(ref);
    return next;
  }

  /** Runs a script of one key (args: the key, then its arguments) by its digest, sending its text only when Redis lacks it. */
  async #run(script: { lua: string; sha: string }, args: Array<string | number | Buffer>): Promise<unknown> {
    try {
      return await this.#redis.callBuffer('EVALSHA', [script.sha, 1, ...args]);
    } catch (err) {
      if (!(err as Error).message.startsWith('NOSCRIPT')) throw err;
      return this.#redis.callBuffer('EVAL', [script.lua, 1, ...args]);
    }
  }

  forget(ref: string): void {
    this.#unsaved.delete(ref);
    this.#redis.del(this.sessionKey(ref)).catch((err: Error) => this.#onError(err));
  }

  async take(ref: string): Promise<KeptStart | null> {
    const name = this.sessionKey(ref);
    const got = (await this.#run(SCRIPTS.take, [name, WRITE_LEASE])) as [Buffer, Buffer, number] | null;
    if (!got) return null;
    const [k, s, end] = got;
    let start: KeptStart;
    try {
      const keys = decodeKeys(decryptSecret(this.#key, k, `${name}:k`));
      const motion = decodeMotion(decryptSecret(this.#key, s, `${name}:s`));
      start = { keys, motion, writeSeq: Number(end) - WRITE_LEASE, writeLimit: Number(end) };
    } catch (err) {
      // sealed under another SECRET_KEY, or not ours: of no use to anyone
      this.#onError(err as Error);
      await this.#redis.del(name);
      return null;
    }
    return start.motion.lastActive + this.#idleMs > Date.now() ? start : null;
  }

  async saveAll(sessions: Array<{ ref: string; motion: SessionMotion }>): Promise<number> {
    let saved = 0;
    // one pipeline per chunk on a single Redis; on a Redis Cluster each session's key is a slot of its own, so each
    // is a transaction of its own (ioredis pipelines only keys of one slot), sent together
    const cluster = this.#redis instanceof Cluster;
    for (let i = 0; i < sessions.length; i += SAVE_CHUNK) {
      const chunk = sessions.slice(i, i + SAVE_CHUNK);
      const shared = cluster ? null : this.#redis.pipeline();
      const runs: Promise<[Error | null, unknown][] | null>[] = [];
      for (const { ref, motion } of chunk) {
        const name = this.sessionKey(ref);
        const s = this.#sealMotion(name, motion);
        const p = shared ?? this.#redis.multi();
        // p: the exact next sequence number (this process seals nothing more): the next one continues without a gap
        const k = this.#unsaved.get(ref);
        if (k) p.hset(name, 'k', k, 's', s, 'p', motion.writeSeq);
        else p.hset(name, 's', s, 'p', motion.writeSeq);
        p.pexpire(name, this.#ttl(motion.lastActive));
        if (!shared) runs.push(p.exec());
      }
      if (shared) runs.push(shared.exec());
      for (const res of await Promise.all(runs)) {
        const failed = res?.find(([err]) => err)?.[0];
        if (failed) throw failed;
      }
      saved += chunk.length;
      for (const { ref } of chunk) this.#unsaved.delete(ref);
    }
    return saved;
  }

  put(id: Buffer, entry: CachedSession): void {
    const name = this.#cacheKey(id);
    const ttl = entry.expiresAt - Date.now();
    if (ttl <= 0) return;
    this.#redis.set(name, encryptSecret(this.#key, encodeCached(entry), name), 'PX', ttl).catch((err: Error) => this.#onError(err));
  }

  remove(id: Buffer): void {
    this.#redis.del(this.#cacheKey(id)).catch((err: Error) => this.#onError(err));
  }

  async fetch(id: Buffer): Promise<CachedSession | undefined> {
    const name = this.#cacheKey(id);
    try {
      const sealed = await this.#redis.getBuffer(name);
      return sealed ? decodeCached(decryptSecret(this.#key, sealed, name)) : undefined;
    } catch (err) {
      this.#onError(err as Error);
      return undefined;
    }
  }
}
