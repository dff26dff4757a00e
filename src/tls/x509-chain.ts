/**
 * Client certificate path validation for the handshake: each certificate is issued and signed by the next, the
 * last by one of the trust anchors (or is one), and every certificate on the path — anchor included — is within
 * its validity period. The device's key must be EC P-256 (the only CertificateVerify algorithm we offer).
 * node:crypto X509Certificate does the ASN.1 and signature work (`checkIssued`, `verify(publicKey)`).
 */
import { X509Certificate } from 'node:crypto';
import { AlertDescription, TlsAlert } from './alert.ts';
import { CertificateAlert } from './ecdhe-ecdsa.ts';

/** Longest chain accepted from a client (device + intermediates). */
export const MAX_CHAIN_LENGTH = 5;

/** Only a CA certificate may issue: otherwise any device could mint certificates for other devices. */
function issuedBy(cert: X509Certificate, issuer: X509Certificate): boolean {
  return issuer.ca && cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
}

function withinValidity(c: X509Certificate, now: number): boolean {
  return Date.parse(c.validFrom) <= now && now <= Date.parse(c.validTo);
}

/** Parses and validates a chain sent by a client (device first); returns it or throws the TlsAlert to send. */
export function verifyClientChain(chainDer: Buffer[], anchors: readonly X509Certificate[], now = Date.now()): X509Certificate[] {
  // RFC 5246 §7.4.6: a server that requires client authentication answers an empty Certificate with handshake_failure.
  if (chainDer.length === 0) throw new TlsAlert(AlertDescription.handshake_failure, 'no client certificate');
  if (chainDer.length > MAX_CHAIN_LENGTH) throw new TlsAlert(CertificateAlert.bad_certificate, `client chain longer than ${MAX_CHAIN_LENGTH}`);
  let chain: X509Certificate[];
  try {
    chain = chainDer.map((d) => new X509Certificate(d));
  } catch {
    throw new TlsAlert(CertificateAlert.bad_certificate, 'unparseable client certificate');
  }
  const key = chain[0].publicKey;
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new TlsAlert(CertificateAlert.unsupported_certificate, 'client certificate key is not EC P-256');
  }
  verifyChain(chain, anchors, now);
  return chain;
}

/** Validates an already parsed chain (device first) against the anchors now; throws the TlsAlert to send. */
export function verifyChain(chain: readonly X509Certificate[], anchors: readonly X509Certificate[], now = Date.now()): void {
  for (let i = 0; i + 1 < chain.length; i++) {
    if (!issuedBy(chain[i], chain[i + 1])) throw new TlsAlert(CertificateAlert.bad_certificate, `certificate ${i} is not issued by certificate ${i + 1}`);
  }
  const last = chain[chain.length - 1];
  const anchor = anchors.find((a) => a.fingerprint256 === last.fingerprint256) ?? anchors.find((a) => issuedBy(last, a));
  if (!anchor) throw new TlsAlert(CertificateAlert.unknown_ca, `chain does not lead to a trust anchor (issuer ${JSON.stringify(last.issuer)})`);
  for (const c of [...chain, anchor]) {
    if (!withinValidity(c, now)) throw new TlsAlert(CertificateAlert.certificate_expired, `certificate ${JSON.stringify(c.subject)} is outside its validity period`);
  }
}

/** Like verifyChain but answers true/false (for re-checking a cached session before resuming it). */
export function chainStillValid(chain: readonly X509Certificate[], anchors: readonly X509Certificate[], now = Date.now()): boolean {
  try {
    verifyChain(chain, anchors, now);
    return true;
  } catch {
    return false;
  }
}
