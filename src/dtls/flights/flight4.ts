/**
 * Flight 4 of a full handshake: ServerHello (+ Certificate, ServerKeyExchange, CertificateRequest for ECDHE_ECDSA,
 * built by flights/flight4-certificate.ts)
 * + ServerHelloDone, the answer to a ClientHello with a valid cookie that does not resume a session. Also the
 * negotiation both flight 4 and flight 4b (resumption) start from: the suite (server preference order, PSK
 * first), extended_master_secret when offered (RFC 7627), renegotiation_info echoed when the client signalled it
 * by extension or SCSV (RFC 5746), and whether the offered session id resumes a cached session (RFC 7627 §5.3
 * decides when the EMS state of the two handshakes differs). No PSK identity hint is sent.
 */
import { AlertDescription, TlsAlert } from '../../tls/alert.ts';
import { ExtensionType, HandshakeType, checkClientHelloOffer, encodeServerHello, findExtension } from '../../tls/messages.ts';
import type { ClientHello, Extension } from '../../tls/messages.ts';
import type { CipherSuite } from '../../tls/suites/index.ts';
import { ExtensionTypeEc, SERVER_EC_POINT_FORMATS, chooseEcdheGroup, isEcdheEcdsa } from '../../tls/ecdhe-ecdsa.ts';
import type { HandshakeMessage } from '../handshake.ts';
import { DTLS12 } from '../record.ts';
import { publicRandomBytes } from '../../tls/random.ts';
import { chooseSuite } from '../../tls/psk-handshake.ts';
import type { CachedSession, SessionCache } from '../session-cache.ts';

export interface Negotiated {
  suite: CipherSuite;
  extendedMasterSecret: boolean;
  secureRenegotiation: boolean;
  clientRandom: Buffer;
  serverRandom: Buffer;
  /** The session id the ServerHello carries: the client's when resuming, a new one otherwise. */
  sessionId: Buffer;
  /** Set when the ClientHello resumes this cached session (abbreviated handshake). */
  resumed?: CachedSession;
  /** Extensions the ServerHello carries beyond renegotiation_info and extended_master_secret (e.g. connection_id). */
  extraExtensions: Extension[];
  /** RFC 8422 §5.2: a ServerHello of an ECC suite answers the client's ec_point_formats with its own. */
  clientSentPointFormats: boolean;
  /** ECDHE_ECDSA full handshakes: the named group of the key exchange. */
  ecdheGroup?: number;
}

export interface NegotiateOptions {
  suites: readonly CipherSuite[];
  cache: SessionCache;
  /** Whether a cached session may still be resumed now (e.g. its certificate chain is still trusted). */
  stillValid(s: CachedSession): boolean;
}

export function negotiate(ch: ClientHello, o: NegotiateOptions): Negotiated {
  // DTLS versions count down: 0xFEFD (1.2) < 0xFEFF (1.0).
  if (ch.clientVersion > DTLS12) throw new TlsAlert(AlertDescription.protocol_version, 'client does not offer DTLS 1.2');
  const offer = checkClientHelloOffer(ch);
  const ems = offer.extendedMasterSecret;
  const base = {
    secureRenegotiation: offer.secureRenegotiation,
    clientRandom: Buffer.from(ch.random),
    serverRandom: publicRandomBytes(32),
    extraExtensions: [],
    clientSentPointFormats: findExtension(ch.extensions, ExtensionTypeEc.ec_point_formats) !== undefined,
  };

  const cached = ch.sessionId.length > 0 ? o.cache.get(ch.sessionId) : undefined;
  const cachedSuite = cached && ch.cipherSuites.includes(cached.suiteId) ? o.suites.find((s) => s.id === cached.suiteId) : undefined;
  if (cached && cachedSuite && o.stillValid(cached)) {
    // RFC 7627 §5.3: a session made with EMS must not be resumed without it; one made without EMS is not resumed
    // by a client that now offers it (a full handshake follows instead).
    if (cached.extendedMasterSecret && !ems) {
      throw new TlsAlert(AlertDescription.handshake_failure, 'resumption of an extended_master_secret session without the extension');
    }
    if (cached.extendedMasterSecret === ems) {
      return { ...base, suite: cachedSuite, extendedMasterSecret: ems, sessionId: Buffer.from(ch.sessionId), resumed: cached };
    }
  }
  // An ECDHE_ECDSA suite only for a client that accepts one of our groups, uncompressed points and ECDSA-SHA256.
  const group = chooseEcdheGroup(ch.extensions);
  const suite = chooseSuite(o.suites, ch.cipherSuites, (s) => group !== undefined || !isEcdheEcdsa(s.id));
  const n: Negotiated = { ...base, suite, extendedMasterSecret: ems, sessionId: o.cache.newId() };
  if (group !== undefined && isEcdheEcdsa(suite.id)) n.ecdheGroup = group;
  return n;
}

export function serverHello(n: Negotiated, messageSeq: number): HandshakeMessage {
  const extensions: Extension[] = [];
  if (n.secureRenegotiation) extensions.push({ type: ExtensionType.renegotiation_info, data: Buffer.from([0]) });
  if (n.extendedMasterSecret) extensions.push({ type: ExtensionType.extended_master_secret, data: Buffer.alloc(0) });
  extensions.push(...n.extraExtensions);
  if (isEcdheEcdsa(n.suite.id) && n.clientSentPointFormats) extensions.push(SERVER_EC_POINT_FORMATS);
  const body = encodeServerHello({
    serverVersion: DTLS12,
    random: n.serverRandom,
    sessionId: n.sessionId,
    cipherSuite: n.suite.id,
    extensions,
  });
  return { type: HandshakeType.server_hello, messageSeq, body };
}

/** Full handshake: ServerHello, the suite's key-exchange messages (none for PSK), ServerHelloDone. */
export function flight4(n: Negotiated, firstMessageSeq: number, keyExchange: Array<{ type: number; body: Buffer }> = []): HandshakeMessage[] {
  let seq = firstMessageSeq;
  const out = [serverHello(n, seq++)];
  for (const m of keyExchange) out.push({ type: m.type, messageSeq: seq++, body: m.body });
  out.push({ type: HandshakeType.server_hello_done, messageSeq: seq, body: Buffer.alloc(0) });
  return out;
}
