/**
 * Message deduplication (RFC 7252 §4.5): the message ids of one peer's requests, each remembered for
 * EXCHANGE_LIFETIME with the reply a duplicate Confirmable request gets again. Bounded twice: per peer
 * (`maxEntries`), and over every peer of a listener by a shared `DedupLimit`, so that many peers together cannot
 * hold unbounded memory. Either bound, when reached, forgets the oldest entry: every entry lives equally long, so
 * the oldest is the one closest to expiring anyway.
 */

/** What is remembered of one request: until when, and the reply to repeat (null: none yet, e.g. its handler runs). */
export interface Seen {
  expires: number;
  reply: Buffer | null;
}

interface Entry extends Seen {
  messageId: number;
  owner: Deduplicator;
}

/** Message ids remembered by all the peers of one listener together. */
export class DedupLimit {
  readonly maxEntries: number;
  // a Set iterates in insertion order: its first entry is the oldest of every peer
  readonly #entries = new Set<Entry>();

  constructor(maxEntries: number) {
    this.maxEntries = maxEntries;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Makes room (forgetting the oldest entries of any peer) and counts `entry`. */
  admit(entry: Entry): void {
    while (this.#entries.size > 0 && this.#entries.size >= this.maxEntries) {
      const oldest = this.#entries.values().next().value as Entry;
      oldest.owner.forget(oldest.messageId);
    }
    this.#entries.add(entry);
  }

  release(entry: Entry): void {
    this.#entries.delete(entry);
  }
}

/** The message ids of one peer. */
export class Deduplicator {
  readonly #entries = new Map<number, Entry>();
  readonly #maxEntries: number;
  readonly #lifetimeMs: number;
  readonly #limit: DedupLimit;

  constructor(opts: { maxEntries: number; lifetimeMs: number; limit?: DedupLimit }) {
    this.#maxEntries = opts.maxEntries;
    this.#lifetimeMs = opts.lifetimeMs;
    this.#limit = opts.limit ?? new DedupLimit(opts.maxEntries);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The entry of `messageId` if it has not expired. */
  get(messageId: number, now: number): Seen | undefined {
    const entry = this.#entries.get(messageId);
    return entry && entry.expires > now ? entry : undefined;
  }

  /** Remembers `messageId` from `now` on, making room first (expired entries, then the oldest). */
  remember(messageId: number, now: number): Seen {
    this.forget(messageId);
    for (const [id, e] of this.#entries) {
      if (e.expires > now && this.#entries.size < this.#maxEntries) break;
      this.forget(id);
    }
    const entry: Entry = { expires: now + this.#lifetimeMs, reply: null, messageId, owner: this };
    this.#limit.admit(entry);
    this.#entries.set(messageId, entry);
    return entry;
  }

  forget(messageId: number): void {
    const entry = this.#entries.get(messageId);
    if (!entry) return;
    this.#entries.delete(messageId);
    this.#limit.release(entry);
  }

  clear(): void {
    for (const id of [...this.#entries.keys()]) this.forget(id);
  }
}
