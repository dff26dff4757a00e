// Verification of a client certificate chain against the trust anchors (the device CA and the live
// supplier certificates): the one check of both device ports, HTTPS (device-identity.ts) and
// CoAP/DTLS (src/tls/x509-chain.ts, at each handshake and before each resumption). The device's
// certificate must be signed directly by an anchor: an intermediate the device presents is never
// trusted on its own, so a deleted supplier certificate (still signed by the device CA) stops its
// devices at once, and no CA below a supplier certificate (pathLen 0) is accepted.
import type { X509Certificate } from 'node:crypto';

/**
 * Why a chain was refused, for the TLS alert: `missing` (no certificate), `unsuitable` (not a device certificate
 * for client authentication), `validity`, `untrusted` (signed by no anchor), `ambiguous` (signed by several).
 */
export type ChainProblem = 'missing' | 'unsuitable' | 'validity' | 'untrusted' | 'ambiguous';

export type ChainCheck =
  | { ok: true; /** device certificate, then the anchor that signed it */ chain: X509Certificate[]; anchor: X509Certificate }
  | { ok: false; problem: ChainProblem; reason: string };

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const ANY_EXTENDED_KEY_USAGE = '2.5.29.37.0';

function validAt(cert: X509Certificate, now: Date): string | null {
  if (now < new Date(cert.validFrom)) return `not valid before ${new Date(cert.validFrom).toISOString()}`;
  if (now > new Date(cert.validTo)) return `expired on ${new Date(cert.validTo).toISOString()}`;
  return null;
}

function signedBy(leaf: X509Certificate, anchor: X509Certificate): boolean {
  // checkIssued compares names (and key identifiers); verify checks the signature itself
  if (!anchor.ca || leaf.checkIssued(anchor) !== true) return false;
  try {
    return leaf.verify(anchor.publicKey);
  } catch {
    return false;
  }
}

/** Checks the presented chain (device certificate first; further certificates are ignored unless they are anchors). */
export function verifyChain(presented: readonly X509Certificate[], anchors: readonly X509Certificate[], now = new Date()): ChainCheck {
  const leaf = presented[0];
  if (!leaf) return { ok: false, problem: 'missing', reason: 'no client certificate' };
  if (leaf.ca) return { ok: false, problem: 'unsuitable', reason: 'the client certificate is a CA certificate, not a device certificate' };
  // node's `keyUsage` lists the extended key usages; without the extension any use is allowed
  const usages = leaf.keyUsage;
  if (usages && !usages.includes(CLIENT_AUTH) && !usages.includes(ANY_EXTENDED_KEY_USAGE)) {
    return { ok: false, problem: 'unsuitable', reason: 'the client certificate is not for client authentication (extendedKeyUsage lacks clientAuth)' };
  }
  const leafValidity = validAt(leaf, now);
  if (leafValidity) return { ok: false, problem: 'validity', reason: `the client certificate ${leafValidity}` };
  const issuers = anchors.filter((anchor) => signedBy(leaf, anchor));
  if (issuers.length === 0) {
    return {
      ok: false,
      problem: 'untrusted',
      reason: 'the client certificate is not signed directly by a trusted certificate (the device CA or a supplier certificate)',
    };
  }
  // two anchors with one key and one name (supplier certificates stored before keys were kept unique): which
  // environment the device belongs to is not decided by whichever anchor happens to come first
  if (issuers.length > 1) {
    return {
      ok: false,
      problem: 'ambiguous',
      reason: `the client certificate is signed by ${issuers.length} trusted certificates with the same key and name; it names no single supplier`,
    };
  }
  const anchor = issuers[0];
  const anchorValidity = validAt(anchor, now);
  if (anchorValidity) return { ok: false, problem: 'validity', reason: `the issuing certificate ${anchorValidity}` };
  return { ok: true, chain: [leaf, anchor], anchor };
}
