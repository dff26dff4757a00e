import type { AppContext } from '../../app/context.ts';
import { namedStatement, type Queryable } from '../../app/db.ts';
import { createRedis, type Redis } from '../../app/redis.ts';

/** Where every process of a deployment announces the devices that got new commands (one channel per QUEUE_NAME). */
export const commandsAddedChannel = (ctx: Pick<AppContext, 'config'>) => `gridgate:commands-added:${ctx.config.queueName}`;

/** A full reload of the hint now and then: the bound on staleness should an announcement be lost (Redis reconnect). */
export const PENDING_HINT_REFRESH_MS = 30_000;

const DEVICES_WITH_PENDING = namedStatement(
  'devices-with-pending-commands',
  'SELECT DISTINCT device_id FROM command WHERE sent_at IS NULL AND dropped_at IS NULL AND deleted_at IS NULL',
);

/** The hints of this process: an add made here reaches them before the add request is answered. */
const localHints = new Set<PendingCommandsHint>();

/**
 * Which devices may have commands waiting. Nearly every device contact has none, and asking
 * PostgreSQL for `args.scheduledCommands` on each one put a database round trip on every report's
 * path; a device known to have none skips it.
 *
 * The hint only ever says "maybe" or "none". It starts from one query of the devices with pending
 * commands; a command add marks its devices "maybe" (in this process at once, in others through
 * Redis pub/sub, announced after the add's commit); a lookup that finds nothing clears the mark
 * unless an add was announced for that device while it ran. A device whose commands were all sent
 * stays "maybe" until its next lookup. A reload every PENDING_HINT_REFRESH_MS and after every Redis
 * reconnect bounds what a lost announcement could hide. Until the first load every device is "maybe".
 */
export class PendingCommandsHint {
  #maybe = new Set<number>();
  /** per device: adds announced, so a lookup that raced an add does not clear the mark */
  #epochs = new Map<number, number>();
  #loaded = false;
  #addedDuringReload: Set<number> | null = null;
  #subscriber: Redis | null = null;
  #timer: NodeJS.Timeout | null = null;
  readonly #db: Queryable;

  constructor(db: Queryable) {
    this.#db = db;
  }

  /** Loads the hint, then keeps it fresh: announcements of this process and (with `ctx`) of the others, periodic reloads. */
  async start(ctx?: Pick<AppContext, 'config' | 'log'>): Promise<void> {
    localHints.add(this);
    if (ctx) {
      const subscriber = createRedis(ctx.config, ctx.log);
      this.#subscriber = subscriber;
      subscriber.on('message', (_channel: string, message: string) => {
        try {
          this.added(JSON.parse(message) as number[]);
        } catch {
          // not ours
        }
      });
      // after a reconnect, announcements made while it was away are lost: read the truth again
      let connectedBefore = false;
      subscriber.on('ready', () => {
        if (connectedBefore) this.reload().catch((err: Error) => ctx.log.warn({ err: err.message }, 'pending commands hint could not be reloaded'));
        connectedBefore = true;
      });
      await subscriber.subscribe(commandsAddedChannel(ctx));
      this.#timer = setInterval(() => {
        this.reload().catch((err: Error) => ctx.log.warn({ err: err.message }, 'pending commands hint could not be reloaded'));
      }, PENDING_HINT_REFRESH_MS);
      this.#timer.unref();
    }
    await this.reload();
  }

  async stop(): Promise<void> {
    localHints.delete(this);
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#subscriber?.quit().catch(() => this.#subscriber?.disconnect());
    this.#subscriber = null;
  }

  /** Whether the device may have commands waiting (true until the hint is loaded). */
  mayHave(deviceId: number): boolean {
    return !this.#loaded || this.#maybe.has(deviceId);
  }

  /** Taken before a lookup; give it back to `checked`. */
  epochOf(deviceId: number): number {
    return this.#epochs.get(deviceId) ?? 0;
  }

  /** Commands were added for these devices. */
  added(deviceIds: number[]): void {
    for (const id of deviceIds) {
      this.#maybe.add(id);
      this.#epochs.set(id, (this.#epochs.get(id) ?? 0) + 1);
      this.#addedDuringReload?.add(id);
    }
  }

  /** A lookup started at `epoch` found `found` commands: none clears the mark, unless an add was announced meanwhile. */
  checked(deviceId: number, epoch: number, found: number): void {
    if (found > 0 || this.epochOf(deviceId) !== epoch || this.#addedDuringReload) return;
    this.#maybe.delete(deviceId);
    this.#epochs.delete(deviceId);
  }

  /** Reads the devices with pending commands again (adds announced while it runs are kept). */
  async reload(): Promise<void> {
    const during = new Set<number>();
    this.#addedDuringReload = during;
    try {
      const { rows } = await this.#db.query<{ device_id: number }>(DEVICES_WITH_PENDING);
      this.#maybe = new Set([...rows.map((r) => r.device_id), ...during]);
      this.#loaded = true;
    } finally {
      if (this.#addedDuringReload === during) this.#addedDuringReload = null;
    }
  }
}

/**
 * Tells every hint that these devices got commands: those of this process at once, the others
 * through Redis. Called after the add's commit, before the add is answered.
 */
export async function announceCommandsAdded(ctx: Pick<AppContext, 'redis' | 'config'>, deviceIds: number[]): Promise<void> {
  if (deviceIds.length === 0) return;
  for (const hint of localHints) hint.added(deviceIds);
  await ctx.redis.publish(commandsAddedChannel(ctx), JSON.stringify(deviceIds));
}
