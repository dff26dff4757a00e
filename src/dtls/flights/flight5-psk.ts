/**
 * Flight 5 of a PSK handshake, its identity part: the identity the client's ClientKeyExchange names, and the key the
 * handshake goes on with. The checks are TLS's (tls/psk-handshake.ts, where the argument is written): an unknown
 * identity goes on with a random key and fails at the client's Finished as a wrong key does, and an identity longer
 * than MAX_PSK_IDENTITY_BYTES is never looked up and counts as unknown.
 */
import { pskOrStandIn, readPskIdentity } from '../../tls/psk-handshake.ts';

/** The identity of a PSK ClientKeyExchange, or undefined when it is too long to be one of ours. */
export function clientPskIdentity(clientKeyExchange: Buffer): string | undefined {
  return readPskIdentity(clientKeyExchange).identity;
}

export { pskOrStandIn };
