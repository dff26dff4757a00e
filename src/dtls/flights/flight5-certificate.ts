/**
 * Flight 5 of an ECDHE_ECDSA handshake, its certificate part: the client's Certificate (its chain, verified against
 * the trust anchors of the moment) and its CertificateVerify (the leaf key's signature over the handshake messages
 * so far). Each throws the TlsAlert the handshake ends with.
 */
import { X509Certificate } from 'node:crypto';
import { parseCertificate, verifyCertificateVerify } from '../../tls/ecdhe-ecdsa.ts';
import { verifyClientChain } from '../../tls/x509-chain.ts';

/**
 * The client's chain, verified; `offeredSubject` is its leaf's subject as offered, known (for the refusal's log line)
 * even when the chain is refused, so it is reported through `offered` before the verification.
 */
export function clientCertificates(
  certificateBody: Buffer,
  anchors: readonly X509Certificate[],
  offered: (subject: string | undefined) => void,
): X509Certificate[] {
  const chain = parseCertificate(certificateBody);
  offered(leafSubject(chain[0]));
  return verifyClientChain(chain, anchors);
}

/** The CertificateVerify's signature by the client's leaf key over `signedMessages` (every handshake message before it). */
export function checkCertificateVerify(body: Buffer, signedMessages: Buffer[], leaf: X509Certificate): void {
  verifyCertificateVerify(body, Buffer.concat(signedMessages), leaf.publicKey);
}

function leafSubject(der: Buffer | undefined): string | undefined {
  if (!der) return undefined;
  try {
    return new X509Certificate(der).subject;
  } catch {
    return undefined;
  }
}
