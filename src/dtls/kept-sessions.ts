/**
 * The server's side of kept sessions (its `keeper`, session-store.ts): each completed handshake written out, leases
 * of write sequence numbers renewed, and take-over: a record for a CID or address:port this process does not know is
 * held while the session is looked for in the keeper, then handled as if the session had always been here. Session ids
 * this process does not know are looked for in the shared resumption cache the same way. Every look-up is bounded (at
 * most maxHandshakes at once, HELD_PER_LOOKUP datagrams held for each), and one that missed is not repeated for a while.
 */
import type dgram from 'node:dgram';
import type { DtlsSession, KeptStart } from './session.ts';
import type { SessionKeys } from './session-state.ts';
import type { SessionCache } from './session-cache.ts';
import type { SessionKeeper } from './session-keeper.ts';

/** How a server names a session to its keeper: by the Connection ID it issued, else by the peer's address:port. */
export function sessionRef(s: { connectionId: Buffer | undefined; remoteAddress: string; remotePort: number }): string {
  return s.connectionId ? `c${s.connectionId.toString('hex')}` : `a${s.remoteAddress}:${s.remotePort}`;
}

/** Datagrams held per session being looked for in the keeper, and kept-state look-ups at once at most. */
export const HELD_PER_LOOKUP = 8;
/** A ref not found in the keeper is not looked for again for this long (a device that lost its session sends until it handshakes). */
const MISS_MEMORY_MS = 5_000;
const MISSES_REMEMBERED = 10_000;

/** What kept sessions need of their server. */
export interface KeptHost {
  /** Whether the server was closed. */
  closed(): boolean;
  /** Look-ups at once at most (the server's maxHandshakes). */
  readonly maxLookups: number;
  /** An established session from its kept state, registered like one made here; null when the server cannot take it. */
  carryOn(kept: KeptStart): DtlsSession | null;
  /** A datagram that waited for a look-up, handled now as if it had just arrived. */
  redeliver(datagram: Buffer, rinfo: dgram.RemoteInfo): void;
  /** The application's bytes kept with a session. */
  attachment(s: DtlsSession): Buffer | undefined;
  /** The keeper could not be reached ('keeperError'; the session carries on), or a take-over failed ('error'). */
  emit(event: 'keeperError' | 'error', err: unknown): void;
}

type Lookup = { promise: Promise<DtlsSession | null>; held: Array<[Buffer, dgram.RemoteInfo]> };

export class KeptSessions {
  readonly keeper: SessionKeeper | undefined;
  readonly #host: KeptHost;
  /** Kept sessions (and session ids) being looked for, by ref, with the datagrams that arrived for them meanwhile. */
  readonly #taking = new Map<string, Lookup>();
  /** Refs recently not found, with when that was (oldest first). */
  readonly #misses = new Map<string, number>();
  /** Sessions whose lease of write sequence numbers is being renewed. */
  readonly #renewing = new Set<DtlsSession>();
  /** Sessions another process took over: what is kept for them is theirs now. */
  readonly #givenUp = new WeakSet<DtlsSession>();
  /** Set by DtlsServer.suspend(): sessions now end without close_notify and stay kept. */
  suspending = false;

  constructor(keeper: SessionKeeper | undefined, host: KeptHost) {
    this.keeper = keeper;
    this.#host = host;
  }

  /** A handshake completed here: the keeper keeps the session, which seals within the first lease it gives. */
  established(s: DtlsSession, keys: SessionKeys): void {
    if (this.keeper) s.limitWrites(this.keeper.established(sessionRef(s), keys, s.motion()));
  }

  /** Half of a session's lease is used: the next is asked for (once at a time); none back means another process holds it now. */
  renew(s: DtlsSession): void {
    const keeper = this.keeper;
    if (!keeper || this.#renewing.has(s) || this.suspending) return;
    this.#renewing.add(s);
    keeper
      .renew(sessionRef(s), s.writeLimit, s.motion(this.#host.attachment(s)))
      .then(
        (end) => {
          if (end !== null) s.limitWrites(end);
          // another process carries this session on now: this one goes without a word
          else this.giveUp(s);
        },
        (err: unknown) => this.#host.emit('keeperError', err),
      )
      .finally(() => this.#renewing.delete(s));
  }

  isRenewing(s: DtlsSession): boolean {
    return this.#renewing.has(s);
  }

  /** Lets a session go without a word to the peer and leaves what is kept of it to whoever carries it on. */
  giveUp(s: DtlsSession): void {
    this.#givenUp.add(s);
    s.release();
  }

  /** A session ended here: an established one ended for good is forgotten by the keeper (not one let go to be carried on). */
  closed(s: DtlsSession, wasHandshake: boolean): void {
    if (!wasHandshake && !this.suspending && !this.#givenUp.has(s)) this.keeper?.forget(sessionRef(s));
  }

  /** Writes the latest state of every established session (with the application's attachment); resolves with how many. */
  saveEstablished(sessions: Iterable<DtlsSession>): Promise<number> {
    const states: Array<{ ref: string; motion: ReturnType<DtlsSession['motion']> }> = [];
    for (const s of sessions) if (s.established) states.push({ ref: sessionRef(s), motion: s.motion(this.#host.attachment(s)) });
    return this.keeper ? this.keeper.saveAll(states) : Promise.resolve(0);
  }

  /** The kept session named `ref` carried on here; null when there is none (or no keeper, or too many look-ups run). */
  takeOver(ref: string): Promise<DtlsSession | null> {
    return this.#take(ref)?.promise ?? Promise.resolve(null);
  }

  /** Holds a datagram for a session this process does not know while the keeper is asked for it; false when it is not asked. */
  holdFor(ref: string, datagram: Buffer, rinfo: dgram.RemoteInfo): boolean {
    const taking = this.#take(ref);
    if (!taking) return false;
    if (taking.held.length < HELD_PER_LOOKUP) taking.held.push([datagram, rinfo]);
    return true;
  }

  /**
   * A ClientHello (its cookie checked) offering a session id this process does not know: the shared cache is asked for
   * it first, then the datagram is handled again. True while that runs (the ClientHello waits for it).
   */
  fetchingResumption(cache: SessionCache, id: Buffer, datagram: Buffer, rinfo: dgram.RemoteInfo): boolean {
    if (!cache.wantsFetch(id)) return false;
    const ref = `s${id.toString('hex')}`;
    if (this.#missedLately(ref)) return false;
    if (this.#taking.has(ref)) return true; // a retransmitted ClientHello: the first one is on its way
    if (this.#taking.size >= this.#host.maxLookups) return false;
    const promise = cache.fetch(id).then((found) => {
      if (!found) this.#missed(ref);
      this.#taking.delete(ref);
      if (!this.#host.closed()) this.#host.redeliver(datagram, rinfo);
      return null;
    });
    this.#taking.set(ref, { promise, held: [] });
    return true;
  }

  /** Starts (or joins) the look-up of a kept session; undefined when there is no keeper or too many look-ups run. */
  #take(ref: string): Lookup | undefined {
    const running = this.#taking.get(ref);
    if (running) return running;
    const keeper = this.keeper;
    if (!keeper || this.#host.closed() || this.suspending || this.#taking.size >= this.#host.maxLookups) return undefined;
    if (this.#missedLately(ref)) return undefined;
    const held: Array<[Buffer, dgram.RemoteInfo]> = [];
    const promise = keeper
      .take(ref)
      .then((kept) => {
        if (!kept) {
          this.#missed(ref);
          return null;
        }
        return this.#host.carryOn(kept);
      })
      .catch((err: unknown) => {
        this.#host.emit('error', err);
        return null;
      })
      .then((session) => {
        this.#taking.delete(ref);
        for (const [d, rinfo] of held) this.#host.redeliver(d, rinfo);
        return session;
      });
    const entry = { promise, held };
    this.#taking.set(ref, entry);
    return entry;
  }

  #missedLately(ref: string): boolean {
    const missed = this.#misses.get(ref);
    return missed !== undefined && missed > Date.now() - MISS_MEMORY_MS;
  }

  #missed(ref: string): void {
    this.#misses.delete(ref);
    this.#misses.set(ref, Date.now());
    while (this.#misses.size > MISSES_REMEMBERED) this.#misses.delete(this.#misses.keys().next().value!);
  }
}
