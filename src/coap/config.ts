import type { Clock } from '../app/clock.ts';

/** CoAP transmission parameters (RFC 7252 §4.8) and this server's bounds, with their defaults in one place. */
export interface CoapConfig {
  /** ACK_TIMEOUT: first wait for the ACK of a separate (Confirmable) response. */
  ackTimeoutMs: number;
  /** ACK_RANDOM_FACTOR: the first wait is ACK_TIMEOUT × a random value in [1, factor]. */
  ackRandomFactor: number;
  /** MAX_RETRANSMIT: retransmissions of a Confirmable response before giving up. */
  maxRetransmit: number;
  /** EXCHANGE_LIFETIME: how long a message id is remembered for deduplication. */
  exchangeLifetimeMs: number;
  /** An answer ready within this window rides on the ACK (piggybacked); later ones go in a separate response. */
  piggybackMs: number;
  /** Largest request body, reassembled from Block1 or in one datagram (4.13 with Size1 above it). */
  maxBodyBytes: number;
  /** Block size exponent this server prefers for Block2 (6 = 1024 bytes); a client's smaller one is honoured. */
  preferredSzx: number;
  /** Largest message sent: an answer that would not fit goes in Block2 blocks, smaller ones if its options are large. */
  maxMessageBytes: number;
  /** Message ids remembered per peer; the oldest goes first when full. */
  maxDedupEntries: number;
  /** Message ids remembered over every peer of a listener (each may keep a reply of up to `maxMessageBytes`); the oldest goes first when full. */
  maxDedupTotal: number;
  /** Block1 uploads reassembled at once per peer. */
  maxUploads: number;
  /**
   * An unfinished Block1 upload is dropped (its bytes back in the upload budget) this long after its last block
   * (Californium's BLOCKWISE_STATUS_LIFETIME). A client sends its next block once the previous one is answered, so
   * between two blocks at most MAX_TRANSMIT_WAIT (RFC 7252 §4.8.2: 93 s at the default parameters) passes.
   */
  blockwiseStatusLifetimeMs: number;
  /** Large answers kept per peer while the client fetches their Block2 blocks. */
  maxBlock2Answers: number;
  /** Requests of one peer whose handler runs at once; beyond it 5.03 with Max-Age 1. */
  maxInFlight: number;
}

/**
 * The wall clock, for a caller that passes none: a library imports only the kernel's Clock type, so it keeps this
 * three-line default of its own (src/app/clock.ts says why).
 */
export const SYSTEM_CLOCK: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
};

export const COAP_DEFAULTS: CoapConfig = {
  ackTimeoutMs: 2_000,
  ackRandomFactor: 1.5,
  maxRetransmit: 4,
  exchangeLifetimeMs: 247_000,
  piggybackMs: 1_000,
  maxBodyBytes: 65_536,
  preferredSzx: 6,
  maxMessageBytes: 1152,
  maxDedupEntries: 256,
  maxDedupTotal: 65_536,
  maxUploads: 2,
  blockwiseStatusLifetimeMs: 93_000,
  maxBlock2Answers: 4,
  maxInFlight: 8,
};
