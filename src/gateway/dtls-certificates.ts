// What the DTLS server (src/dtls/, ECDHE-ECDSA suites) needs from the PKI: the server key and chain
// from CERTS_DIR and the trust anchors, which follow supplier certificate changes at runtime.
import { createPrivateKey, type KeyObject, type X509Certificate } from 'node:crypto';
import type { AppContext } from '../app/context.ts';
import { loadServerCredentials } from '../pki/files.ts';
import { currentTrust, trustAnchors } from '../connectivity/supplier-certificates/trust.ts';

export interface DtlsCertificateOptions {
  /** the server certificate's ECDSA P-256 private key */
  key: KeyObject;
  /** server certificate first, then the device CA */
  chain: X509Certificate[];
  /** the device CA and the live supplier certificates, as of now (never waits; current while watchTrust runs) */
  trustAnchors: () => X509Certificate[];
}

/**
 * The `certificate` option of createDtlsServer. Loads the trust anchors before returning; the
 * gateway role keeps them current (watchTrust in src/service.ts). After the handshake, the listener
 * hands `session.peerCertificates` to identifyCertificateDevice (src/gateway/device-identity.ts).
 */
export async function dtlsCertificateOptions(ctx: AppContext): Promise<DtlsCertificateOptions> {
  const creds = loadServerCredentials(ctx.config);
  await currentTrust(ctx);
  return { key: createPrivateKey(creds.key), chain: creds.chain, trustAnchors: () => trustAnchors(ctx) };
}
