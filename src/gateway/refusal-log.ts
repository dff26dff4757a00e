/**
 * Why a device was refused, at `info`: an operator whose device cannot connect sees the identity it offered and the
 * reason (no device has that identity; its key is not the stored one; its certificate is not trusted), never a key.
 * Refusals are what a scanner sends too, so the log is bounded: one line per identity (or address, for certificates)
 * per `perKeyMs`, at most `perSecond` lines a second in all, the lines left out counted in the next one written.
 */
import type { Logger } from '../app/logger.ts';
import type { DeviceProtocol } from './admission.ts';

export interface RefusalLogOptions {
  perKeyMs: number;
  perSecond: number;
  /** how many identities it remembers at most (a scan of random identities does not grow it without bound) */
  maxKeys: number;
  now: () => number;
}

export const REFUSAL_LOG_DEFAULTS: RefusalLogOptions = { perKeyMs: 60_000, perSecond: 20, maxKeys: 10_000, now: Date.now };

/** What an operator should make of a handshake's error message. */
export function refusalReason(message: string, pskIdentity: string | undefined): string {
  if (/unknown PSK identity|PSK identity of \d+ bytes/.test(message)) return 'no device has this PSK identity';
  if (pskIdentity !== undefined && /Finished mismatch|bad[_ ]record[_ ]mac|decrypt|authentication failed|failed authentication/i.test(message))
    return 'the key the device used is not the key stored for this PSK identity';
  return message;
}

export class RefusalLog {
  readonly #log: Logger;
  readonly #o: RefusalLogOptions;
  readonly #lastByKey = new Map<string, number>();
  #second = 0;
  #inSecond = 0;
  #suppressed = 0;

  constructor(log: Logger, options: Partial<RefusalLogOptions> = {}) {
    this.#log = log;
    this.#o = { ...REFUSAL_LOG_DEFAULTS, ...options };
  }

  /** A refused device credential: logged unless its identity (or address) was logged within `perKeyMs` or the second is full. */
  refused(protocol: DeviceProtocol, info: { pskIdentity?: string; remoteAddress?: string }, message: string): void {
    const now = this.#o.now();
    const key = info.pskIdentity !== undefined ? `psk:${info.pskIdentity}` : `address:${info.remoteAddress ?? '?'}`;
    const last = this.#lastByKey.get(key);
    if (last !== undefined && now - last < this.#o.perKeyMs) return;
    const second = Math.floor(now / 1000);
    if (second !== this.#second) {
      this.#second = second;
      this.#inSecond = 0;
    }
    if (this.#inSecond >= this.#o.perSecond) {
      this.#suppressed++;
      return;
    }
    this.#inSecond++;
    if (this.#lastByKey.size >= this.#o.maxKeys) this.#lastByKey.clear();
    this.#lastByKey.set(key, now);
    const suppressed = this.#suppressed;
    this.#suppressed = 0;
    this.#log.info(
      {
        protocol,
        remoteAddress: info.remoteAddress,
        ...(info.pskIdentity !== undefined ? { pskIdentity: info.pskIdentity } : {}),
        reason: refusalReason(message, info.pskIdentity),
        ...(suppressed > 0 ? { refusalsNotLogged: suppressed } : {}),
      },
      'device refused',
    );
  }
}
