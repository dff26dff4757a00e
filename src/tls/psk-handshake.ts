/**
 * What a TLS 1.2 and a DTLS 1.2 server check and derive alike between the ClientHello and the server's Finished, written
 * once for both (tls/server.ts, and dtls/flights/ flight 4 and flight 5): the suite chosen in the server's order, the
 * PSK identity a ClientKeyExchange names and the key the handshake goes on with, the master secret, and the Finished
 * verify_data in both directions. Only the framing around them differs between TLS and DTLS.
 *
 * The security argument, stated once: an unknown identity is not told apart from a wrong key (RFC 4279 §2 allows it;
 * it keeps identities from being enumerated): the handshake goes on with a random key, so the client's Finished fails
 * authentication exactly as a wrong key's does, after the same lookup. An identity longer than MAX_PSK_IDENTITY_BYTES
 * is never looked up (it reaches neither PostgreSQL nor a Redis key chosen by an unauthenticated peer) and counts as
 * unknown. The client's verify_data is compared in constant time.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { AlertDescription, TlsAlert } from './alert.ts';
import { parseClientKeyExchangePsk, parseFinished } from './messages.ts';
import { extendedMasterSecret, masterSecret, pskPreMasterSecret, verifyData } from './prf.ts';
import type { PrfSecret } from './prf.ts';
import { MAX_PSK_IDENTITY_BYTES, requirePsk } from './psk.ts';
import type { CipherSuite } from './suites/index.ts';

/** The first suite in the server's preference order that the client offers and `usable` accepts; handshake_failure otherwise. */
export function chooseSuite<S extends Pick<CipherSuite, 'id'>>(
  serverOrder: readonly S[],
  offered: readonly number[],
  usable: (s: S) => boolean = () => true,
): S {
  const suite = serverOrder.find((s) => offered.includes(s.id) && usable(s));
  if (!suite) throw new TlsAlert(AlertDescription.handshake_failure, 'no shared cipher suite');
  return suite;
}

/**
 * The identity a PSK ClientKeyExchange names (RFC 4279 §2), with its length in bytes; `identity` is undefined when it is
 * longer than MAX_PSK_IDENTITY_BYTES (not to be looked up: no device has one).
 */
export function readPskIdentity(clientKeyExchange: Buffer): { identity: string | undefined; byteLength: number } {
  const raw = parseClientKeyExchangePsk(clientKeyExchange);
  return { identity: raw.length <= MAX_PSK_IDENTITY_BYTES ? raw.toString('utf8') : undefined, byteLength: raw.length };
}

/** The identity's key (checked), or a random stand-in when the lookup found none (`known` false). */
export function pskOrStandIn(psk: Buffer | null, identity: string | undefined): { key: Buffer; known: boolean } {
  if (!psk) return { key: randomBytes(32), known: false };
  return { key: requirePsk(psk, identity), known: true };
}

/** What the master secret is derived from besides the premaster secret. */
export interface MasterSecretInput {
  extendedMasterSecret: boolean;
  clientRandom: Buffer;
  serverRandom: Buffer;
}

/**
 * RFC 5246 §8.1 / RFC 7627 §4: the master secret from a premaster secret. `sessionHash` gives the transcript hash up to
 * and including the ClientKeyExchange; it is asked for only with extended_master_secret.
 */
export function deriveMasterSecret(preMaster: Buffer, n: MasterSecretInput, sessionHash: () => Buffer): Buffer {
  return n.extendedMasterSecret ? extendedMasterSecret(preMaster, sessionHash()) : masterSecret(preMaster, n.clientRandom, n.serverRandom);
}

/** The master secret of a plain PSK key exchange (RFC 4279 §2: the premaster secret made of the key). */
export function pskMasterSecret(key: Buffer, n: MasterSecretInput, sessionHash: () => Buffer): Buffer {
  return deriveMasterSecret(pskPreMasterSecret(key), n, sessionHash);
}

/**
 * The client's Finished: its verify_data must be the PRF of the master secret over the transcript so far (RFC 5246
 * §7.4.9), compared in constant time; decrypt_error otherwise. A wrong (or stand-in) PSK shows here.
 */
export function checkClientFinished(master: PrfSecret, transcriptHash: Buffer, body: Buffer): void {
  if (!timingSafeEqual(verifyData(master, 'client', transcriptHash), parseFinished(body))) {
    throw new TlsAlert(AlertDescription.decrypt_error, 'client Finished mismatch');
  }
}

/** The server's Finished body: verify_data over the transcript including the client's Finished. */
export function serverFinishedData(master: PrfSecret, transcriptHash: Buffer): Buffer {
  return verifyData(master, 'server', transcriptHash);
}
