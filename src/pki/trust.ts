// Trust anchors of the device ports: the device CA (from CERTS_DIR) and every live supplier
// certificate. Kept in memory per context and reloaded when a supplier certificate changes: at
// once in the process that changed it, and within REFRESH_MS elsewhere (a version counter in Redis).
import { X509Certificate } from 'node:crypto';
import type { AppContext } from '../app/context.ts';
import { loadServerCredentials } from './files.ts';

/** A supplier certificate as the gateway needs it. */
export interface SupplierAnchor {
  hashId: string;
  environmentId: number;
  environmentHashId: string;
  certificate: X509Certificate;
  identifier: string;
  identifierHash: string;
}

export interface TrustSnapshot {
  deviceCa: X509Certificate;
  suppliers: SupplierAnchor[];
  /** device CA first, then the supplier certificates */
  anchors: X509Certificate[];
  /** supplier certificates by SHA-256 fingerprint (node's `fingerprint256`) */
  supplierByFingerprint: Map<string, SupplierAnchor>;
}

// one counter per deployment: its processes share QUEUE_NAME (as they share the counters' keys)
const versionKey = (ctx: AppContext) => `${ctx.config.queueName}:pki:trust-version`;
const REFRESH_MS = 1000;

interface TrustState {
  snapshot: TrustSnapshot | null;
  version: string | null;
  checkedAt: number;
  dirty: boolean;
  loading: Promise<TrustSnapshot> | null;
}

const states = new WeakMap<AppContext, TrustState>();

function stateOf(ctx: AppContext): TrustState {
  let s = states.get(ctx);
  if (!s) {
    s = { snapshot: null, version: null, checkedAt: 0, dirty: true, loading: null };
    states.set(ctx, s);
  }
  return s;
}

async function load(ctx: AppContext, version: string | null): Promise<TrustSnapshot> {
  const { deviceCa } = loadServerCredentials(ctx.config);
  const { rows } = await ctx.db.query<{ hash_id: string; environment_id: number; env_hash_id: string; certificate: string; identifier: string; identifier_hash: string }>(
    `SELECT s.hash_id, s.environment_id, e.hash_id AS env_hash_id, s.certificate, s.identifier, s.identifier_hash
       FROM supplier_certificate s JOIN environment e ON e.id = s.environment_id
      WHERE s.deleted_at IS NULL AND e.deleted_at IS NULL ORDER BY s.id`);
  const suppliers: SupplierAnchor[] = [];
  for (const r of rows) {
    const certificate = new X509Certificate(r.certificate);
    // only what our own device CA signed is an anchor (a CA key rotation leaves older ones out)
    if (certificate.checkIssued(deviceCa) && certificate.verify(deviceCa.publicKey)) {
      suppliers.push({ hashId: r.hash_id, environmentId: Number(r.environment_id), environmentHashId: r.env_hash_id, certificate, identifier: r.identifier, identifierHash: r.identifier_hash });
    }
  }
  const snapshot: TrustSnapshot = {
    deviceCa,
    suppliers,
    anchors: [deviceCa, ...suppliers.map((s) => s.certificate)],
    supplierByFingerprint: new Map(suppliers.map((s) => [s.certificate.fingerprint256, s])),
  };
  const state = stateOf(ctx);
  state.snapshot = snapshot;
  state.version = version;
  return snapshot;
}

/** The current trust anchors, reloading them first when they changed. */
export async function currentTrust(ctx: AppContext): Promise<TrustSnapshot> {
  const state = stateOf(ctx);
  // a load that began before an invalidation may hold the old set: wait for it, then decide afresh
  while (state.loading) await state.loading.catch(() => undefined);
  const now = Date.now();
  if (state.snapshot && !state.dirty && now - state.checkedAt < REFRESH_MS) return state.snapshot;
  state.loading = (async () => {
    try {
      const version = await ctx.redis.get(versionKey(ctx));
      state.checkedAt = Date.now();
      if (state.snapshot && !state.dirty && version === state.version) return state.snapshot;
      state.dirty = false;
      return await load(ctx, version);
    } finally {
      state.loading = null;
    }
  })();
  return state.loading;
}

/**
 * The trust anchors now, without waiting (for the DTLS server's `trustAnchors` option): the last
 * loaded set; a reload is started in the background when it may be stale. Call
 * `currentTrust(ctx)` once at start so the first handshake already has them.
 */
export function trustAnchors(ctx: AppContext): X509Certificate[] {
  const state = stateOf(ctx);
  if (!state.snapshot || state.dirty || Date.now() - state.checkedAt >= REFRESH_MS) {
    currentTrust(ctx).catch((err: Error) => ctx.log.warn({ err: err.message }, 'trust anchors could not be reloaded'));
  }
  return state.snapshot?.anchors ?? [loadServerCredentials(ctx.config).deviceCa];
}

/** After a supplier certificate is added, deleted or its identifier changed: every process reloads. */
export async function invalidateTrust(ctx: AppContext): Promise<void> {
  stateOf(ctx).dirty = true;
  await ctx.redis.incr(versionKey(ctx));
}
