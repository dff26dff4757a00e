/**
 * What an established session keeps of its handshake, and no more: a server holds hundreds of thousands of idle
 * sessions, so their negotiation is one shared frozen object per combination, flight 6 stays as its 12 bytes of
 * verify_data, and long-lived small buffers are copied out of the 64 KiB receive buffers they were sliced from.
 */
import { HandshakeType } from '../tls/messages.ts';
import type { Flight } from './flights/datagrams.ts';
import type { Negotiated } from './flights/flight4.ts';
import type { HandshakeMessage } from './handshake.ts';
import type { CachedSession } from './session-cache.ts';

const EMPTY = Buffer.alloc(0);
const NO_EXTENSIONS: Negotiated['extraExtensions'] = [];

/** A copy in its own (unpooled) memory. */
export const owned = (b: Buffer): Buffer => {
  const copy = Buffer.alloc(b.length);
  b.copy(copy);
  return copy;
};
const ownedMessage = (m: HandshakeMessage): HandshakeMessage => ({ ...m, body: owned(m.body) });

/**
 * What `resumed` holds once the handshake is over, where only its presence counts: the cached session itself (its
 * master secret) stays in the cache, not in every resumed idle session.
 */
const RESUMED: CachedSession = Object.freeze({ masterSecret: EMPTY, suiteId: 0, extendedMasterSecret: false, peerCertificates: [], expiresAt: 0 });
type SettledFields = Pick<Negotiated, 'suite' | 'extendedMasterSecret' | 'secureRenegotiation' | 'clientSentPointFormats' | 'ecdheGroup'>;
const SETTLED = new Map<string, Negotiated>();

/**
 * An established session's negotiation: what it still reads of it (the suite, the flags) with the per-handshake
 * buffers emptied. Few combinations exist, so every session with the same one shares one frozen object.
 */
export function settled(f: SettledFields, resumed: boolean): Negotiated {
  const name = `${f.suite.id}:${+f.extendedMasterSecret}:${+f.secureRenegotiation}:${+f.clientSentPointFormats}:${f.ecdheGroup ?? ''}:${+resumed}`;
  let n = SETTLED.get(name);
  if (!n) {
    n = Object.freeze({
      ...f,
      clientRandom: EMPTY,
      serverRandom: EMPTY,
      sessionId: EMPTY,
      extraExtensions: NO_EXTENSIONS,
      ...(resumed ? { resumed: RESUMED } : {}),
    });
    SETTLED.set(name, n);
  }
  return n;
}

/** The last flight as an established session keeps it: flight 6 as its Finished's verify_data (latin1), any other copied. */
export function keptFlight(f: Flight | undefined): { flight?: Flight; finished6?: string } {
  if (f && f.plain.length === 0 && f.encrypted.length === 1 && f.encrypted[0].type === HandshakeType.finished) {
    return { finished6: f.encrypted[0].body.toString('latin1') };
  }
  if (f) return { flight: { plain: f.plain.map(ownedMessage), encrypted: f.encrypted.map(ownedMessage) } };
  return {};
}
