/**
 * Flight 5's last message: the client's Finished, whose verify_data must be the PRF of the master secret over the
 * transcript so far (RFC 5246 §7.4.9), compared in constant time. A wrong PSK shows here. The check is TLS's
 * (tls/psk-handshake.ts): DTLS hashes the same messages without their fragment fields.
 */
export { checkClientFinished } from '../../tls/psk-handshake.ts';
