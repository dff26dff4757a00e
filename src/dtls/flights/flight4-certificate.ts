/**
 * The ECDHE_ECDSA part of flight 4 (between ServerHello and ServerHelloDone): the server's Certificate chain, a
 * ServerKeyExchange with fresh ECDHE parameters (x25519 or P-256) signed by the server key, and a CertificateRequest for
 * ecdsa_sign (devices must present a certificate).
 */
import type { KeyObject, X509Certificate } from 'node:crypto';
import { HandshakeType } from '../../tls/messages.ts';
import { EphemeralEcdhe, encodeCertificate, encodeCertificateRequest, encodeServerKeyExchange } from '../../tls/ecdhe-ecdsa.ts';
import type { Negotiated } from './flight4.ts';

/** The server's certificate configuration as the sessions use it. */
export interface ServerCertificate {
  key: KeyObject;
  chainDer: Buffer[];
  /** Called at each client certificate check, so the anchors can change while the server runs. */
  trustAnchors(): X509Certificate[];
}

export function certificateKeyExchange(n: Negotiated, cert: ServerCertificate): { ephemeral: EphemeralEcdhe; messages: Array<{ type: number; body: Buffer }> } {
  const ephemeral = new EphemeralEcdhe(n.ecdheGroup);
  return {
    ephemeral,
    messages: [
      { type: HandshakeType.certificate, body: encodeCertificate(cert.chainDer) },
      { type: HandshakeType.server_key_exchange, body: encodeServerKeyExchange(ephemeral.params, n.clientRandom, n.serverRandom, cert.key) },
      { type: HandshakeType.certificate_request, body: encodeCertificateRequest() },
    ],
  };
}
