// What a DTLS server needs to keep sessions beyond its process. The library only asks; the gateway provides the
// implementation (src/gateway/dtls-session-store.ts keeps them in Redis, sealed).
import type { SessionKeys, SessionMotion } from './session-state.ts';
import type { KeptStart } from './session.ts';

/** What DtlsServer needs to keep sessions beyond its process; `ref` names a session ('c<cid hex>' or 'a<address>:<port>'). */
export interface SessionKeeper {
  /**
   * A handshake completed: keep the session (written in the background; what cannot be written now is written by
   * saveAll). Returns the end of the session's first lease of write sequence numbers.
   */
  established(ref: string, keys: SessionKeys, motion: SessionMotion): number;
  /**
   * Writes the session's motion and leases it the next WRITE_LEASE sequence numbers after `leaseEnd`: the new end; null
   * when another process leased numbers of this session meanwhile (it holds the session now); Infinity when nothing is
   * kept for it any more (nobody else can load it).
   */
  renew(ref: string, leaseEnd: number, motion: SessionMotion): Promise<number | null>;
  /** The session ended for good. */
  forget(ref: string): void;
  /** Claims a kept session for this process: its state and the lease it may seal in, or null. */
  take(ref: string): Promise<KeptStart | null>;
  /** Writes the exact state of sessions this process lets go (all on shutdown, or one handed to another node); resolves when Redis has them. */
  saveAll(sessions: Array<{ ref: string; motion: SessionMotion }>): Promise<number>;
}
