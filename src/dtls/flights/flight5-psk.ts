/**
 * Flight 5 of a PSK handshake, its identity part: the identity the client's ClientKeyExchange names, and the key the
 * handshake goes on with. An unknown identity is not told apart from a wrong key (RFC 4279 §2 allows it; it keeps
 * identities from being enumerated): the handshake goes on with a random key, so the client's Finished fails
 * authentication exactly as a wrong key's does, after the same lookup. An identity longer than
 * MAX_PSK_IDENTITY_BYTES is never looked up (it reaches neither PostgreSQL nor a Redis key) and counts as unknown.
 */
import { randomBytes } from 'node:crypto';
import { parseClientKeyExchangePsk } from '../../tls/messages.ts';
import { requirePsk } from '../../tls/psk.ts';
import { MAX_PSK_IDENTITY_BYTES } from '../limits.ts';

/** The identity of a PSK ClientKeyExchange, or undefined when it is too long to be one of ours. */
export function clientPskIdentity(clientKeyExchange: Buffer): string | undefined {
  const raw = parseClientKeyExchangePsk(clientKeyExchange);
  return raw.length <= MAX_PSK_IDENTITY_BYTES ? raw.toString('utf8') : undefined;
}

/** The identity's key (checked), or a random stand-in when the lookup found none. */
export function pskOrStandIn(psk: Buffer | null, identity: string | undefined): { key: Buffer; known: boolean } {
  if (!psk) return { key: randomBytes(32), known: false };
  return { key: requirePsk(psk, identity), known: true };
}
