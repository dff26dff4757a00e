/**
 * The DTLS server's limits and their defaults (the one source: `DTLS_DEFAULTS`, from the declarations of ./settings.ts that
 * `config.dtls` is loaded from), and per-source-address admission for new handshakes: how many associations (handshaking or established) one IP
 * address may hold, and a token bucket on how fast it may start handshakes. Checked only after the cookie
 * proved the address, so a spoofed flood cannot use up someone else's allowance.
 */

import type { IntSetting } from '../app/settings.ts';
import { DTLS_LIMIT_SETTINGS } from './settings.ts';

/** One declaration for every limit (tsc refuses a limit without one). */
const LIMIT_SETTINGS: { readonly [K in keyof DtlsLimits]: IntSetting } = DTLS_LIMIT_SETTINGS;

/** Limits of the DTLS server (each an option of `createDtlsServer` and a `DTLS_*` setting of ./settings.ts). */
export interface DtlsLimits extends AddressLimitOptions {
  /** DTLS_MAX_SESSIONS: established sessions at most; new handshakes beyond it are dropped. */
  maxSessions: number;
  /** DTLS_MAX_HANDSHAKES: handshakes in progress at most (counted after the stateless cookie check). */
  maxHandshakes: number;
  /** DTLS_HANDSHAKE_TIMEOUT_MS: a handshake not complete after this long is abandoned. */
  handshakeTimeoutMs: number;
  /** DTLS_IDLE_TIMEOUT_MS: a session with no authentic record for this long is closed. */
  idleTimeoutMs: number;
  /** DTLS_MTU: largest datagram the server sends; flights are fragmented to fit. */
  mtu: number;
  /**
   * DTLS_RECEIVE_BUFFER_BYTES: the socket's receive buffer (SO_RCVBUF, capped by the kernel's net.core.rmem_max). A
   * flood of ClientHellos fills the kernel's default (about 200 KB) whenever the event loop pauses, and the datagrams
   * then dropped are the devices' as much as the flood's.
   */
  receiveBufferBytes: number;
}

/** One cap on PSK identities for TLS and DTLS (src/tls/psk.ts says why 1020 bytes). */
export { MAX_PSK_IDENTITY_BYTES } from '../tls/psk.ts';

/** The declared defaults (DTLS_LIMIT_SETTINGS in ./settings.ts, the same declarations `config.dtls` is loaded from). */
export const DTLS_DEFAULTS: Readonly<DtlsLimits> = Object.freeze(
  Object.fromEntries(Object.entries(LIMIT_SETTINGS).map(([key, s]) => [key, s.default])) as unknown as DtlsLimits,
);

export interface AddressLimitOptions {
  /** Associations (handshakes in progress + sessions) per source address at most. */
  maxSessionsPerAddress: number;
  /** Handshakes per second a source address may start, sustained. */
  handshakeRatePerAddress: number;
  /** Handshakes a source address may start in a burst (the bucket's size). */
  handshakeBurstPerAddress: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Buckets kept at most; beyond it the full ones (addresses that behaved) are forgotten first. */
const MAX_BUCKETS = 100_000;

export class AddressLimits {
  readonly #o: AddressLimitOptions;
  readonly #sessions = new Map<string, number>();
  readonly #buckets = new Map<string, Bucket>();

  constructor(o: AddressLimitOptions) {
    this.#o = o;
  }

  /** Associations now counted for `address`. */
  sessions(address: string): number {
    return this.#sessions.get(address) ?? 0;
  }

  /** True (and a token spent) when `address` may start a handshake now. */
  admit(address: string, now = Date.now()): boolean {
    if (this.sessions(address) >= this.#o.maxSessionsPerAddress) return false;
    const burst = this.#o.handshakeBurstPerAddress;
    let b = this.#buckets.get(address);
    if (b) {
      b.tokens = Math.min(burst, b.tokens + ((now - b.at) / 1000) * this.#o.handshakeRatePerAddress);
      b.at = now;
    } else {
      if (this.#buckets.size >= MAX_BUCKETS) this.#prune(now);
      b = { tokens: burst, at: now };
      this.#buckets.set(address, b);
    }
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  added(address: string): void {
    this.#sessions.set(address, this.sessions(address) + 1);
  }

  removed(address: string): void {
    const n = this.sessions(address) - 1;
    if (n > 0) this.#sessions.set(address, n);
    else this.#sessions.delete(address);
  }

  /** Drops buckets that have refilled (they behave exactly like a new one), or the oldest half if none has. */
  #prune(now: number): void {
    const { handshakeRatePerAddress: rate, handshakeBurstPerAddress: burst } = this.#o;
    for (const [k, b] of this.#buckets) {
      if (b.tokens + ((now - b.at) / 1000) * rate >= burst) this.#buckets.delete(k);
    }
    if (this.#buckets.size < MAX_BUCKETS) return;
    let n = this.#buckets.size / 2;
    for (const k of this.#buckets.keys()) {
      if (n-- <= 0) break;
      this.#buckets.delete(k);
    }
  }
}

/**
 * The handshakes in progress (DTLS_MAX_HANDSHAKES slots), by source address. When every slot is taken, a new
 * handshake from an address that holds fewer than some other address takes the oldest slot of the address holding
 * the most: each address keeps at most a fair share while slots are scarce, so hosts that pass the cookie check and
 * then stall cannot keep devices at other addresses out for the handshake timeout (30 s by default).
 */
export class HandshakeSlots<T> {
  readonly #addressOf: (handshake: T) => string;
  readonly #byAddress = new Map<string, Set<T>>();
  #size = 0;

  constructor(addressOf: (handshake: T) => string) {
    this.#addressOf = addressOf;
  }

  get size(): number {
    return this.#size;
  }

  add(handshake: T): void {
    const address = this.#addressOf(handshake);
    let own = this.#byAddress.get(address);
    if (!own) this.#byAddress.set(address, (own = new Set()));
    if (own.has(handshake)) return;
    own.add(handshake);
    this.#size++;
  }

  /** False when it was not here (e.g. established already). */
  delete(handshake: T): boolean {
    const address = this.#addressOf(handshake);
    const own = this.#byAddress.get(address);
    if (!own?.delete(handshake)) return false;
    this.#size--;
    if (own.size === 0) this.#byAddress.delete(address);
    return true;
  }

  /** The handshake a new one from `address` may replace: the oldest of the address holding the most, if it holds more. */
  victimFor(address: string): T | undefined {
    let most: Set<T> | undefined;
    for (const own of this.#byAddress.values()) if (!most || own.size > most.size) most = own;
    if (!most || most.size <= (this.#byAddress.get(address)?.size ?? 0)) return undefined;
    return most.values().next().value;
  }
}
