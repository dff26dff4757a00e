// Verification of a client certificate chain against the trust anchors (the device CA and the live
// supplier certificates). The device's certificate must be signed directly by an anchor: an
// intermediate the device presents is never trusted on its own, so a deleted supplier certificate
// (still signed by the device CA) stops its devices at once.
import type { X509Certificate } from 'node:crypto';

export type ChainCheck =
  | { ok: true; /** device certificate, then the anchor that signed it */ chain: X509Certificate[]; anchor: X509Certificate }
  | { ok: false; reason: string };

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const ANY_EXTENDED_KEY_USAGE = '2.5.29.37.0';

function validAt(cert: X509Certificate, now: Date): string | null {
  if (now < new Date(cert.validFrom)) return `not valid before ${new Date(cert.validFrom).toISOString()}`;
  if (now > new Date(cert.validTo)) return `expired on ${new Date(cert.validTo).toISOString()}`;
  return null;
}

/** Checks the presented chain (device certificate first; further certificates are ignored unless they are anchors). */
export function verifyChain(presented: X509Certificate[], anchors: readonly X509Certificate[], now = new Date()): ChainCheck {
  const leaf = presented[0];
  if (!leaf) return { ok: false, reason: 'no client certificate' };
  if (leaf.ca) return { ok: false, reason: 'the client certificate is a CA certificate, not a device certificate' };
  // node's `keyUsage` lists the extended key usages; without the extension any use is allowed
  const usages = leaf.keyUsage;
  if (usages && !usages.includes(CLIENT_AUTH) && !usages.includes(ANY_EXTENDED_KEY_USAGE)) {
    return { ok: false, reason: 'the client certificate is not for client authentication (extendedKeyUsage lacks clientAuth)' };
  }
  const leafValidity = validAt(leaf, now);
  if (leafValidity) return { ok: false, reason: `the client certificate ${leafValidity}` };
  for (const anchor of anchors) {
    // checkIssued compares names (and key identifiers); verify checks the signature itself
    if (!anchor.ca || leaf.checkIssued(anchor) !== true) continue;
    let signed: boolean;
    try {
      signed = leaf.verify(anchor.publicKey);
    } catch {
      signed = false;
    }
    if (!signed) continue;
    const anchorValidity = validAt(anchor, now);
    if (anchorValidity) return { ok: false, reason: `the issuing certificate ${anchorValidity}` };
    return { ok: true, chain: [leaf, anchor], anchor };
  }
  return { ok: false, reason: 'the client certificate is not signed by a trusted certificate (the device CA or a supplier certificate)' };
}
