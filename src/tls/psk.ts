import { AlertDescription, TlsAlert } from './alert.ts';

/**
 * Longest PSK identity (bytes, UTF-8) a handshake looks up; a longer one is answered as an unknown identity without a
 * lookup (no database query, no cache key chosen by an unauthenticated peer). RFC 4279 allows 2^16-1 bytes; the REST
 * API takes identities of up to 255 characters (interface spec), at most 4 bytes each in UTF-8: a shorter cap would
 * lock out devices the API accepted.
 */
export const MAX_PSK_IDENTITY_BYTES = 1020;

/** Calls the application's PSK lookup; a lookup that throws synchronously becomes a rejected promise. */
export function lookupPskSafely(lookupPsk: (identity: string) => Promise<Buffer | null>, identity: string): Promise<Buffer | null> {
  try {
    return Promise.resolve(lookupPsk(identity));
  } catch (err) {
    return Promise.reject(err);
  }
}

/** The key the lookup found, or the alert the handshake ends with (RFC 4279 §2: unknown_psk_identity). */
export function requirePsk(psk: Buffer | null, identity: string | undefined): Buffer {
  if (!psk) throw new TlsAlert(AlertDescription.unknown_psk_identity, `unknown PSK identity ${JSON.stringify(identity)}`);
  if (!Buffer.isBuffer(psk) || psk.length === 0 || psk.length > 0xffff) {
    throw new TlsAlert(AlertDescription.internal_error, 'lookupPsk returned an invalid key');
  }
  return psk;
}
