/**
 * Stateless cookie exchange (RFC 6347 §4.2.1). cookie = HMAC-SHA256(secret, address:port ‖ ClientHello fields),
 * where the fields are client_version, random, session_id, cipher_suites and compression_methods — the ones a
 * client must repeat unchanged in its second ClientHello. The secret rotates; the previous one stays valid for one
 * period so a client caught by a rotation still gets through. Nothing is stored per client.
 *
 * The HMAC input is written once into a scratch buffer and MACed with precomputed pads (HmacSha256Key): a
 * verification costs one HMAC (the previous secret is tried only when the current one does not match).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { ClientHello } from '../tls/messages.ts';
import { HmacSha256Key } from '../tls/prf.ts';

export const COOKIE_LENGTH = 32;

export class CookieSecrets {
  #current = newSecret();
  #previous = newSecret();

  /** Makes a new current secret; the old current one is still accepted until the next rotation. */
  rotate(): void {
    this.#previous = this.#current;
    this.#current = newSecret();
  }

  make(address: string, port: number, ch: ClientHello): Buffer {
    return cookieFor(this.#current, address, port, ch);
  }

  verify(address: string, port: number, ch: ClientHello): boolean {
    const got = ch.cookie;
    if (!got || got.length !== COOKIE_LENGTH) return false;
    // Each comparison is constant-time; which secret matched (current or previous) is no secret.
    return timingSafeEqual(got, cookieFor(this.#current, address, port, ch)) || timingSafeEqual(got, cookieFor(this.#previous, address, port, ch));
  }
}

function newSecret(): HmacSha256Key {
  return new HmacSha256Key(randomBytes(32));
}

/** HMAC input scratch: [64 bytes for the pad ‖ message]; grows for a ClientHello with very many suites. */
let INPUT = Buffer.alloc(1024);

function cookieFor(secret: HmacSha256Key, address: string, port: number, ch: ClientHello): Buffer {
  // address ≤ 45 (IPv6 text) + ':' + port ≤ 5 + NUL, version 2, random 32, session id 1 + 32, suites, compression
  const max = 64 + 3 * address.length + 8 + 2 + ch.random.length + 1 + ch.sessionId.length + 2 * ch.cipherSuites.length + 1 + ch.compressionMethods.length;
  if (INPUT.length < max) INPUT = Buffer.alloc(2 * max);
  const b = INPUT;
  let o = 64;
  o += b.write(`${address}:${port}\0`, o, 'utf8');
  b.writeUInt16BE(ch.clientVersion, o);
  o += 2;
  o += ch.random.copy(b, o);
  b[o++] = ch.sessionId.length;
  o += ch.sessionId.copy(b, o);
  for (const s of ch.cipherSuites) {
    b.writeUInt16BE(s, o);
    o += 2;
  }
  b[o++] = ch.compressionMethods.length;
  o += ch.compressionMethods.copy(b, o);
  const mac = Buffer.allocUnsafe(COOKIE_LENGTH);
  mac.write(secret.macPrefixed(b, o), 0, 'latin1');
  b.fill(0, 0, 64);
  return mac;
}
