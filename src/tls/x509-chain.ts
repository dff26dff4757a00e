/**
 * Client certificate checks of the DTLS handshake. Which chains are trusted is decided by the device ports' one rule
 * (src/pki/verify.ts, the HTTPS port's too): a device certificate for client authentication, not a CA, signed
 * directly by exactly one trust anchor, both within their validity period. Here only what the handshake adds: the
 * DER is parsed, the chain's length bounded, the device's key must be EC P-256 (the only CertificateVerify algorithm
 * we offer), and a refusal becomes the TLS alert to send.
 */
import { X509Certificate } from 'node:crypto';
import { verifyChain as verifyDeviceChain, type ChainProblem } from '../pki/verify.ts';
import { AlertDescription, TlsAlert } from './alert.ts';
import { CertificateAlert } from './ecdhe-ecdsa.ts';

/** Longest chain accepted from a client (device + intermediates). */
export const MAX_CHAIN_LENGTH = 5;

// RFC 5246 §7.2.2: access_denied is "a valid certificate was received, but ... the sender decided not to proceed"
const ACCESS_DENIED = 49;

const ALERTS: Record<ChainProblem, number> = {
  // RFC 5246 §7.4.6: a server that requires client authentication answers an empty Certificate with handshake_failure
  missing: AlertDescription.handshake_failure,
  unsuitable: CertificateAlert.unsupported_certificate,
  validity: CertificateAlert.certificate_expired,
  untrusted: CertificateAlert.unknown_ca,
  ambiguous: ACCESS_DENIED,
};

/** Parses and validates a chain sent by a client (device first); returns it or throws the TlsAlert to send. */
export function verifyClientChain(chainDer: Buffer[], anchors: readonly X509Certificate[], now = Date.now()): X509Certificate[] {
  if (chainDer.length === 0) throw new TlsAlert(ALERTS.missing, 'no client certificate');
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
  const check = verifyDeviceChain(chain, anchors, new Date(now));
  if (!check.ok) throw new TlsAlert(ALERTS[check.problem], check.reason);
}

/** Like verifyChain but answers true/false (for re-checking a cached session before resuming it). */
export function chainStillValid(chain: readonly X509Certificate[], anchors: readonly X509Certificate[], now = Date.now()): boolean {
  return verifyDeviceChain(chain, anchors, new Date(now)).ok;
}
