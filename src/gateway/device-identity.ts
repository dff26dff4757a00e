// Which device a client certificate is: shared by the HTTPS device port (mutual TLS) and CoAP over
// DTLS (ECDHE-ECDSA). The device certificate must be signed by a live supplier certificate; that
// supplier's identifier function (UDF-CONTRACT.md §2) names the device type and the device, which
// is found or created in the supplier's environment. The answer is cached by the certificate's
// fingerprint, so the identifier runs once per certificate, not per request.
import type { X509Certificate } from 'node:crypto';
import type { AppContext } from '../app/context.ts';
import { AppError } from '../app/errors.ts';
import { findOrCreateDevice } from '../connectivity/devices/find-or-create.ts';
import { describeRunError, Sandbox, sandboxFromConfig } from '../sandbox/runner.ts';
import type { CertificateView } from '../sandbox/types.ts';
import { chainSubjects } from '../pki/subjects.ts';
import { currentTrust } from '../connectivity/supplier-certificates/trust.ts';
import { verifyChain } from '../pki/verify.ts';
import { supplierAlerts } from '../notifications/supplier-alerts.ts';

/** A device identified by its certificate. */
export interface CertificateDevice {
  deviceHashId: string;
  environmentHashId: string;
  supplierCertificateHashId: string;
  /** `webRequest.certificate` of its requests: the subjects of the verified chain, device first */
  certificate: CertificateView;
  /** true when identifying this certificate created the device */
  created: boolean;
}

/**
 * Why a certificate gets no device. `chain`: untrusted or expired (refuse the connection);
 * `identifier`: a good chain that names no device (not under a supplier certificate, identifier failed).
 */
export class CertificateRefused extends Error {
  readonly stage: 'chain' | 'identifier';
  constructor(stage: 'chain' | 'identifier', message: string) {
    super(message);
    this.stage = stage;
  }
}

// bounded so a deleted device is found-or-created again soon after (nothing else invalidates this cache)
const POSITIVE_TTL_MS = 60_000;
// a failing identifier is not re-run for every reconnect of a device in a loop
const NEGATIVE_TTL_MS = 5_000;
const MAX_ENTRIES = 50_000;

interface Entry {
  at: number;
  ttl: number;
  value: Promise<CertificateDevice>;
}

/** A context's certificate identities (`ctx.certificateIdentity`): answers by chain, and the identifiers' sandbox (made on first use). */
export interface IdentityState {
  cache: Map<string, Entry>;
  sandbox: Sandbox | null;
}

declare module '../app/context.ts' {
  interface AppContext {
    /** certificate → device answers and the identifier sandbox of this context (src/gateway/device-identity.ts) */
    certificateIdentity: IdentityState;
  }
}

/** The certificate identity state of a new context (src/context.ts): nothing cached, no sandbox yet. */
export function createIdentityState(): IdentityState {
  return { cache: new Map(), sandbox: null };
}

const stateOf = (ctx: AppContext): IdentityState => ctx.certificateIdentity;

function sandboxOf(ctx: AppContext): Sandbox {
  const state = stateOf(ctx);
  state.sandbox ??= sandboxFromConfig(ctx.config, ctx.log);
  return state.sandbox;
}

/**
 * The device a client certificate chain (device certificate first, as the peer sent it) stands
 * for. Verifies the chain itself (validity, signature by a live supplier certificate), so a caller
 * may hand over a chain its TLS/DTLS layer verified less strictly. Throws CertificateRefused.
 */
export async function identifyCertificateDevice(ctx: AppContext, chain: X509Certificate[]): Promise<CertificateDevice> {
  const trust = await currentTrust(ctx);
  const check = verifyChain(chain, trust.anchors);
  if (!check.ok) throw new CertificateRefused('chain', check.reason);
  const supplier = trust.supplierByFingerprint.get(check.anchor.fingerprint256);
  if (!supplier)
    throw new CertificateRefused(
      'identifier',
      'the client certificate is signed by the device CA itself, not by a supplier certificate: no identifier names its device',
    );
  const leaf = check.chain[0];
  // the identifier's version is part of the key: an updated identifier names devices afresh
  const key = `${leaf.fingerprint256}|${supplier.hashId}|${supplier.identifierHash}`;
  const state = stateOf(ctx);
  const hit = state.cache.get(key);
  if (hit && Date.now() - hit.at < hit.ttl) return hit.value;
  const value = identify(ctx, [leaf, supplier.certificate, trust.deviceCa], supplier);
  const entry: Entry = { at: Date.now(), ttl: POSITIVE_TTL_MS, value };
  state.cache.set(key, entry);
  value.catch((err: unknown) => {
    // a refusal is remembered briefly; a failure of ours (database, sandbox) is not
    if (err instanceof CertificateRefused) entry.ttl = NEGATIVE_TTL_MS;
    else if (state.cache.get(key) === entry) state.cache.delete(key);
  });
  if (state.cache.size > MAX_ENTRIES) state.cache.delete(state.cache.keys().next().value as string);
  return value;
}

async function identify(
  ctx: AppContext,
  chain: X509Certificate[],
  supplier: { hashId: string; environmentId: number; environmentHashId: string; identifier: string },
): Promise<CertificateDevice> {
  const certificate: CertificateView = { subjects: chainSubjects(chain) };
  const run = await sandboxOf(ctx).runIdentifier({ isolationKey: supplier.environmentHashId, source: supplier.identifier, args: { certificate } });
  if (!run.ok) {
    ctx.log.info({ supplierCertificate: supplier.hashId, error: run.error.message, logs: run.logs }, 'certificate identifier failed');
    supplierAlerts(ctx).record([
      {
        objectType: 'supplierCertificate',
        objectHashId: supplier.hashId,
        message: describeRunError(run.error),
        deviceId: null,
        activityHashId: null,
        at: new Date(),
      },
    ]);
    throw new CertificateRefused('identifier', `the identifier of supplier certificate ${supplier.hashId} failed: ${describeRunError(run.error)}`);
  }
  try {
    const device = await findOrCreateDevice(ctx, {
      environmentId: supplier.environmentId,
      deviceTypeHashId: run.result.deviceTypeHashId,
      supplierDeviceIdentifier: run.result.deviceIdentifier,
    });
    return {
      deviceHashId: device.hashId,
      environmentHashId: device.environmentHashId,
      supplierCertificateHashId: supplier.hashId,
      certificate,
      created: device.created,
    };
  } catch (err) {
    if (err instanceof AppError)
      throw new CertificateRefused('identifier', `the identifier of supplier certificate ${supplier.hashId} named no usable device: ${err.message}`);
    throw err;
  }
}

/** Drops cached certificate → device answers (tests; after a device is deleted). */
export function forgetCertificateDevices(ctx: AppContext): void {
  stateOf(ctx).cache.clear();
}

/** Disposes the identifier sandbox of this context (service stop). */
export function disposeCertificateIdentity(ctx: AppContext): void {
  const state = stateOf(ctx);
  state.sandbox?.dispose();
  state.sandbox = null;
  state.cache.clear();
}
