// The change bus. A feature that changed something other parts cache says so here, once, after its commit; the caches
// that care listen. No feature calls another's cache.
//
// - `publish` runs this process's listeners (origin 'local') and awaits them, then publishes the change on the
//   deployment's channel in Redis: the change's answer goes out after this process's caches forgot, and Redis pushes
//   it to every other process's subscriber as it is published, before that answer.
// - Every other process's listeners hear it with origin 'remote'. A process hears its own changes only locally.
// - Pub/sub loses what is published while a subscriber is away: after a reconnect every listener is called with
//   `null` (anything may have changed). Each cache also bounds a lost change by its own ttl or version check.
// - The subscriber connection is opened by the first `listen()` (a cache that needs remote changes calls it); a
//   process that only publishes holds none.
import { randomBytes } from 'node:crypto';
import type { Logger } from './logger.ts';
import type { Redis } from './redis.ts';

/** Each kind of change and what it names. */
export interface Changes {
  /** devices whose cached copies went stale: a link, unlink or channel mapping; the device, its pin (group) or environment deleted */
  devices: { hashIds: string[] };
  /** PSK identities whose cached credentials went stale: the device deleted or re-keyed, its type or environment deleted */
  credentials: { identities: string[] };
  /** supplier certificates added, deleted or renamed: the trust anchors of client-certificate devices */
  trust: { environmentIds: number[] };
  /**
   * the report path's threshold cache went stale: pins whose thresholds or open threshold issues changed, quantities
   * whose default limits changed (or that were merged away); `all`, every pin (an environment's auto-close settings)
   */
  thresholds: { pinIds: number[]; quantityHashIds: string[]; all?: boolean };
}
export type ChangeKind = keyof Changes;
/** `change` null: the subscriber was away, so any change may have been missed. */
export type ChangeListener<K extends ChangeKind> = (change: Changes[K] | null, origin: 'local' | 'remote') => void | Promise<void>;

interface Wire {
  from: string;
  kind: ChangeKind;
  change: unknown;
}

export interface ChangeBusOptions {
  /** the connection changes are published on */
  redis: Pick<Redis, 'publish'>;
  /** opens the subscriber connection (its own: a subscribed connection runs no other command) */
  subscriber: () => Redis;
  /** one channel per deployment (QUEUE_NAME) */
  channel: string;
  log: Logger;
}

export class ChangeBus {
  readonly #o: ChangeBusOptions;
  readonly #listeners = new Map<ChangeKind, Set<ChangeListener<ChangeKind>>>();
  /** names this bus in what it publishes, so its own subscriber skips it */
  readonly #from = randomBytes(8).toString('hex');
  #subscriber: Redis | null = null;
  #listening: Promise<void> | null = null;

  constructor(o: ChangeBusOptions) {
    this.#o = o;
  }

  /** Calls `listener` on each change of `kind`; returns the function that stops it. */
  on<K extends ChangeKind>(kind: K, listener: ChangeListener<K>): () => void {
    const set = this.#listeners.get(kind) ?? new Set();
    this.#listeners.set(kind, set);
    set.add(listener as ChangeListener<ChangeKind>);
    return () => set.delete(listener as ChangeListener<ChangeKind>);
  }

  /** Tells this process's listeners (awaited) and every other process's (through Redis). */
  async publish<K extends ChangeKind>(kind: K, change: Changes[K]): Promise<void> {
    // a cache that could not forget (its store away) fails the change's request: better a 503 than a stale answer
    const failed = await this.#deliver(kind, change, 'local');
    if (failed.length > 0) throw failed[0];
    const wire: Wire = { from: this.#from, kind, change };
    await this.#o.redis.publish(this.#o.channel, JSON.stringify(wire));
  }

  /** Opens the subscriber for other processes' changes; resolves once subscribed. */
  listen(): Promise<void> {
    if (this.#listening) return this.#listening;
    const subscriber = this.#o.subscriber();
    this.#subscriber = subscriber;
    subscriber.on('message', (_channel: string, message: string) => {
      let wire: Wire;
      try {
        wire = JSON.parse(message) as Wire;
      } catch {
        return;
      }
      if (wire.from === this.#from || !this.#listeners.has(wire.kind)) return;
      void this.#deliver(wire.kind, wire.change as Changes[ChangeKind], 'remote');
    });
    let connectedBefore = false;
    subscriber.on('ready', () => {
      if (connectedBefore) for (const kind of this.#listeners.keys()) void this.#deliver(kind, null, 'remote');
      connectedBefore = true;
    });
    this.#listening = subscriber.subscribe(this.#o.channel).then(() => undefined);
    return this.#listening;
  }

  async close(): Promise<void> {
    const subscriber = this.#subscriber;
    this.#subscriber = null;
    this.#listening = null;
    await subscriber?.quit().catch(() => subscriber.disconnect());
  }

  /** Runs every listener of `kind`; returns what they threw (logged when the change came from elsewhere). */
  async #deliver(kind: ChangeKind, change: Changes[ChangeKind] | null, origin: 'local' | 'remote'): Promise<unknown[]> {
    const listeners = [...(this.#listeners.get(kind) ?? [])];
    const results = await Promise.allSettled(listeners.map(async (listener) => listener(change, origin)));
    const failed = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    if (origin === 'remote') for (const err of failed) this.#o.log.warn({ err: (err as Error)?.message, kind }, 'a cache could not take in a change');
    return failed;
  }
}
