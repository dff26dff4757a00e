import type { Queryable } from '../../app/db.ts';
import type { Logger } from '../../app/logger.ts';
import { OutageLog } from '../../app/outage-log.ts';
import { touchDevices } from './store.ts';
import { Batcher } from '../../app/batcher.ts';
import { isTransient } from '../../app/transient.ts';

/** lastOnlineAt is kept to this: a device reporting every 100 ms costs one row update a second, not ten. */
export const TOUCH_RESOLUTION_MS = 1000;
/** Devices whose last write is remembered; past it the memory starts again (a device then writes once more). */
const REMEMBERED_DEVICES = 100_000;

/**
 * A device's lastOnlineAt, moved by every contact a worker runs: one UPDATE per batch of devices, the latest contact
 * per device winning. A contact within `resolutionMs` of the device's last write is not written at once but once the
 * resolution has passed (trailing edge), so reportLate sees every contact and a chatty device costs one write a second.
 *
 * `touch` answers when the write is stored (a job waits for it); the trailing writes have no job to fail, so a store
 * outage reads as one warn line when it starts and one info line when it ends.
 */
export class LastOnlineWriter {
  readonly #batch: Batcher<{ id: number; at: Date }>;
  readonly #outage: OutageLog;
  readonly #resolutionMs: number;
  /** ms of the last write asked for, per device */
  readonly #written = new Map<number, number>();
  /** contacts inside the resolution, written when it has passed */
  readonly #trailing = new Map<number, Date>();
  #timer: NodeJS.Timeout | null = null;

  constructor(db: Queryable, log: Logger, opts: { resolutionMs?: number } = {}) {
    this.#resolutionMs = opts.resolutionMs ?? TOUCH_RESOLUTION_MS;
    this.#outage = new OutageLog(log, 'lastOnlineAt could not be written: PostgreSQL is unavailable', 'lastOnlineAt is written again');
    this.#batch = new Batcher(
      async (items) => {
        const latest = new Map<number, Date>();
        for (const t of items) if ((latest.get(t.id)?.getTime() ?? 0) < t.at.getTime()) latest.set(t.id, t.at);
        await touchDevices(db, latest);
      },
      { maxItems: 500, maxDelayMs: 5, splitOn: (err) => !isTransient(err) },
    );
  }

  /** The device `id` was heard from at `at`: resolves once that is stored, or at once when it is written later. */
  touch(id: number, at: Date): Promise<void> {
    return this.#touch(id, at) ?? Promise.resolve();
  }

  /**
   * The same for a caller that does not wait (a firmware download is answered whatever becomes of its contact): a
   * failed write is not the caller's, it counts toward the outage's one warn line.
   */
  heard(id: number, at: Date): void {
    this.#touch(id, at)?.then(
      () => this.#outage.up(),
      (err: Error) => this.#outage.down(err),
    );
  }

  /** The write of a contact, or null when it is left to the trailing edge. */
  #touch(id: number, at: Date): Promise<void> | null {
    const last = this.#written.get(id) ?? 0;
    if (at.getTime() - last < this.#resolutionMs) {
      if ((this.#trailing.get(id)?.getTime() ?? 0) < at.getTime()) this.#trailing.set(id, at);
      this.#timer ??= setTimeout(this.#flushTrailing, this.#resolutionMs);
      return null;
    }
    if (this.#written.size > REMEMBERED_DEVICES) this.#written.clear();
    this.#written.set(id, at.getTime());
    return this.#batch.add({ id, at });
  }

  readonly #flushTrailing = (): void => {
    this.#timer = null;
    for (const [id, at] of this.#trailing) {
      this.#written.set(id, at.getTime());
      this.#batch.add({ id, at }).then(
        () => this.#outage.up(),
        (err: Error) => this.#outage.down(err),
      );
    }
    this.#trailing.clear();
  };

  /** Writes the contacts still inside their resolution now, and waits for every write. */
  async close(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#flushTrailing();
    await this.#batch.drain();
  }
}
