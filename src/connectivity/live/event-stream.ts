import type { ServerResponse } from 'node:http';

/** What a browser's EventSource waits before it reconnects (the stream's `retry:` field). */
export const RETRY_MS = 3000;
/** A comment line this often keeps proxies from closing an idle stream and shows a dead client (its write fails). */
export const KEEPALIVE_MS = 15_000;
/** A client that reads slower than its events come is dropped once this much waits unsent. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;

/**
 * A text/event-stream answer (server-sent events) on a raw HTTP response: `retry:` first, an event per `send`, a
 * `: keepalive` comment every KEEPALIVE_MS, and one `ended` callback however it ends (client gone, server closing,
 * a client too slow).
 */
export class EventStream {
  readonly #res: ServerResponse;
  #timer: NodeJS.Timeout | null = null;
  #ended = false;
  readonly #onEnd: (() => void)[] = [];

  constructor(res: ServerResponse, keepalive: () => void = () => undefined, keepaliveMs = KEEPALIVE_MS) {
    this.#res = res;
    // a client gone before its stream opened: nothing to write, and its 'close' came already
    if (res.destroyed) {
      this.#ended = true;
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      // nginx (the fleet's) would otherwise buffer the stream
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    res.write(`retry: ${RETRY_MS}\n\n`);
    res.on('close', () => this.end());
    res.on('error', () => this.end());
    this.#timer = setInterval(() => {
      if (this.#write(': keepalive\n\n')) keepalive();
    }, keepaliveMs);
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Calls `fn` once the stream has ended (at once if it has). */
  onEnd(fn: () => void): void {
    if (this.#ended) fn();
    else this.#onEnd.push(fn);
  }

  /** One event: `event: <name>`, `id: <id>`, `data: <data>` (data holds no line break: JSON). */
  send(name: string, id: string, data: string): boolean {
    return this.#write(`event: ${name}\nid: ${id}\ndata: ${data}\n\n`);
  }

  /** Ends the answer; `drop`: at once, without sending what waits (a client too slow). */
  end(drop = false): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#timer) clearInterval(this.#timer);
    if (drop) this.#res.destroy();
    else if (!this.#res.writableEnded) this.#res.end();
    for (const fn of this.#onEnd.splice(0)) fn();
  }

  #write(text: string): boolean {
    if (this.#ended) return false;
    if (this.#res.writableLength > MAX_BUFFERED_BYTES) {
      this.end(true);
      return false;
    }
    this.#res.write(text);
    return true;
  }
}
