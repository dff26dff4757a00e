// The live log's fan-out in one API process: ONE Redis subscriber connection for every stream the process
// serves. An environment's channel is subscribed while the process streams it and left with its last stream, so
// a process hears only the environments it streams, and a stream that ends leaves no subscription behind.
// A notice is loaded once per process (not once per stream) and handed to every stream whose filter it matches.

import type { Redis } from '../../app/redis.ts';
import type { Logger } from '../../app/logger.ts';
import type { ActivityNotice } from './notice.ts';

/** One open stream: what it wants, and where its events go. */
export interface LiveStream {
  environmentId: number;
  /** filters: null for any */
  deviceId: number | null;
  deviceTypeId: number | null;
  deliver(activity: unknown, notice: ActivityNotice): void;
}

export interface LiveLogHubDeps {
  /** a new connection, used only to subscribe */
  subscriber(): Redis;
  channel(environmentId: number): string;
  /** the activity as GET /supplier-activity/:hashId answers it, read within its environment */
  load(environmentId: number, hashId: string): Promise<unknown>;
  log: Pick<Logger, 'warn'>;
}

interface Channel {
  environmentId: number;
  streams: Set<LiveStream>;
  subscribed: Promise<unknown>;
  delivered: Promise<void>;
}

export class LiveLogHub {
  readonly #deps: LiveLogHubDeps;
  #subscriber: Redis | null = null;
  readonly #channels = new Map<string, Channel>();

  constructor(deps: LiveLogHubDeps) {
    this.#deps = deps;
  }

  /** Streams open in this process. */
  get size(): number {
    let n = 0;
    for (const c of this.#channels.values()) n += c.streams.size;
    return n;
  }

  /** Adds a stream; resolves once its environment's channel is subscribed (a notice published from then on reaches it). Returns its removal. */
  async add(stream: LiveStream): Promise<() => void> {
    const name = this.#deps.channel(stream.environmentId);
    let channel = this.#channels.get(name);
    if (!channel) {
      // SUBSCRIBE and UNSUBSCRIBE go out in order on the one connection: the last call made is the state Redis keeps
      channel = { environmentId: stream.environmentId, streams: new Set(), subscribed: this.#connection().subscribe(name), delivered: Promise.resolve() };
      this.#channels.set(name, channel);
    }
    channel.streams.add(stream);
    const joined = channel;
    let removed = false;
    const remove = () => {
      if (removed) return;
      removed = true;
      joined.streams.delete(stream);
      if (joined.streams.size > 0 || this.#channels.get(name) !== joined) return;
      this.#channels.delete(name);
      this.#subscriber?.unsubscribe(name).catch(() => undefined);
    };
    try {
      await joined.subscribed;
    } catch (err) {
      remove();
      throw err;
    }
    return remove;
  }

  /** Closes the subscriber connection; streams still open get no more events. */
  async close(): Promise<void> {
    this.#channels.clear();
    const subscriber = this.#subscriber;
    this.#subscriber = null;
    await subscriber?.quit().catch(() => subscriber.disconnect());
  }

  #connection(): Redis {
    if (this.#subscriber) return this.#subscriber;
    const subscriber = this.#deps.subscriber();
    subscriber.on('message', (channel: string, message: string) => this.#heard(channel, message));
    this.#subscriber = subscriber;
    return subscriber;
  }

  #heard(name: string, message: string): void {
    const channel = this.#channels.get(name);
    if (!channel) return;
    let notices: ActivityNotice[];
    try {
      notices = JSON.parse(message) as ActivityNotice[];
      if (!Array.isArray(notices)) return;
    } catch {
      return;
    }
    // loaded while the previous message's are delivered, delivered in the order published
    const loads = notices.map((n) => {
      const streams = [...channel.streams].filter((s) => matches(s, n));
      return streams.length === 0
        ? null
        : this.#deps.load(channel.environmentId, n.hashId).then(
            (activity) => ({ activity, streams }),
            (err: Error) => {
              this.#deps.log.warn({ err: err.message, activityHashId: n.hashId }, 'live log: a stored activity could not be read');
              return null;
            },
          );
    });
    channel.delivered = channel.delivered.then(async () => {
      for (const [i, load] of loads.entries()) {
        const loaded = await load;
        // a stream that closed meanwhile is no longer in the channel
        for (const s of loaded?.streams ?? []) {
          if (!channel.streams.has(s)) continue;
          try {
            s.deliver(loaded!.activity, notices[i]);
          } catch (err) {
            this.#deps.log.warn({ err: (err as Error).message }, 'live log: an event could not be written');
          }
        }
      }
    });
  }
}

const matches = (s: LiveStream, n: ActivityNotice) =>
  (s.deviceId === null || s.deviceId === n.deviceId) && (s.deviceTypeId === null || s.deviceTypeId === n.deviceTypeId);
