/**
 * Flight 4: ServerHello + ServerHelloDone, the answer to a ClientHello with a valid cookie. Chooses the suite
 * (server preference order), extended_master_secret when offered (RFC 7627), and echoes renegotiation_info when
 * the client signalled it by extension or SCSV (RFC 5746). No ServerKeyExchange: no PSK identity hint is sent.
 */
import { randomBytes } from 'node:crypto';
import { AlertDescription, TlsAlert } from '../../tls/alert.ts';
import {
  ExtensionType,
  HandshakeType,
  TLS_EMPTY_RENEGOTIATION_INFO_SCSV,
  encodeServerHello,
  findExtension,
} from '../../tls/messages.ts';
import type { ClientHello, Extension } from '../../tls/messages.ts';
import type { CipherSuite } from '../../tls/suites/index.ts';
import type { HandshakeMessage } from '../handshake.ts';
import { DTLS12 } from '../record.ts';

export interface Negotiated {
  suite: CipherSuite;
  extendedMasterSecret: boolean;
  clientRandom: Buffer;
  serverRandom: Buffer;
}

export function negotiate(ch: ClientHello, suites: readonly CipherSuite[]): Negotiated {
  // DTLS versions count down: 0xFEFD (1.2) < 0xFEFF (1.0).
  if (ch.clientVersion > DTLS12) throw new TlsAlert(AlertDescription.protocol_version, 'client does not offer DTLS 1.2');
  if (!ch.compressionMethods.includes(0)) throw new TlsAlert(AlertDescription.illegal_parameter, 'no null compression');
  const suite = suites.find((s) => ch.cipherSuites.includes(s.id));
  if (!suite) throw new TlsAlert(AlertDescription.handshake_failure, 'no shared cipher suite');
  const ri = findExtension(ch.extensions, ExtensionType.renegotiation_info);
  if (ri && !(ri.data.length === 1 && ri.data[0] === 0)) {
    throw new TlsAlert(AlertDescription.handshake_failure, 'non-empty renegotiation_info in initial handshake');
  }
  const ems = findExtension(ch.extensions, ExtensionType.extended_master_secret);
  if (ems && ems.data.length !== 0) throw new TlsAlert(AlertDescription.decode_error, 'bad extended_master_secret');
  return { suite, extendedMasterSecret: ems !== undefined, clientRandom: Buffer.from(ch.random), serverRandom: randomBytes(32) };
}

export function flight4(ch: ClientHello, n: Negotiated, firstMessageSeq: number): HandshakeMessage[] {
  const extensions: Extension[] = [];
  const secureRenegotiation =
    findExtension(ch.extensions, ExtensionType.renegotiation_info) !== undefined ||
    ch.cipherSuites.includes(TLS_EMPTY_RENEGOTIATION_INFO_SCSV);
  if (secureRenegotiation) extensions.push({ type: ExtensionType.renegotiation_info, data: Buffer.from([0]) });
  if (n.extendedMasterSecret) extensions.push({ type: ExtensionType.extended_master_secret, data: Buffer.alloc(0) });
  const serverHello = encodeServerHello({
    serverVersion: DTLS12,
    random: n.serverRandom,
    sessionId: Buffer.alloc(0), // no resumption yet
    cipherSuite: n.suite.id,
    extensions,
  });
  return [
    { type: HandshakeType.server_hello, messageSeq: firstMessageSeq, body: serverHello },
    { type: HandshakeType.server_hello_done, messageSeq: firstMessageSeq + 1, body: Buffer.alloc(0) },
  ];
}
