// Trust anchors of the device ports: the device CA (from CERTS_DIR) and every live supplier
// certificate, kept in memory per context. The DTLS server reads them without waiting at every
// handshake, so they must already be current when a device connects, never reloaded on its behalf:
// - the process that adds, deletes or re-identifies a supplier certificate publishes a `trust`
//   change (src/app/changes.ts); this cache hears it first (`trustChanged`, wired by the composition
//   root): it bumps the version counter and reloads its anchors before the change is answered;
// - every gateway process (watchTrust) reloads when it hears the change from another process,
//   and checks a version counter in Redis every TRUST_CHECK_MS in case an announcement was lost
//   (its subscriber reconnecting), so a change reaches it at the latest TRUST_CHECK_MS after the
//   answer; a full reload every TRUST_RELOAD_MS covers a counter lost with Redis's data.
import { X509Certificate } from 'node:crypto';
import type { AppContext } from '../../app/context.ts';
import { loadServerCredentials } from '../../pki/files.ts';

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

/** The longest a gateway process keeps trusting the old set after a change was answered (lost announcement). */
export const TRUST_CHECK_MS = 1000;
/** A full reload now and then, whatever the version counter says. */
export const TRUST_RELOAD_MS = 60_000;

// one counter per deployment: its processes share QUEUE_NAME (as they share the counters' keys)
export const trustVersionKey = (ctx: AppContext) => `${ctx.config.queueName}:pki:trust-version`;

interface Watch {
  users: number;
  timers: NodeJS.Timeout[];
  started: Promise<void>;
}

/** A context's trust anchors (`ctx.trust`) and what loads and watches them. */
export interface TrustState {
  snapshot: TrustSnapshot | null;
  /** the version counter as read before the snapshot's query */
  version: string | null;
  checkedAt: number;
  /** the load in flight, and the one queued behind it (a change made while a load runs needs a load that starts after it) */
  loading: Promise<TrustSnapshot> | null;
  queued: Promise<TrustSnapshot> | null;
  watch: Watch | null;
  listeners: Set<(snapshot: TrustSnapshot) => void>;
}

declare module '../../app/context.ts' {
  interface AppContext {
    /** the trust anchors of this context's device ports (src/connectivity/supplier-certificates/trust.ts) */
    trust: TrustState;
  }
}

/** The trust state of a new context (src/context.ts): nothing loaded, nobody watching. */
export function createTrustState(): TrustState {
  return { snapshot: null, version: null, checkedAt: 0, loading: null, queued: null, watch: null, listeners: new Set() };
}

const stateOf = (ctx: AppContext): TrustState => ctx.trust;

async function load(ctx: AppContext): Promise<TrustSnapshot> {
  const version = await ctx.redis.get(trustVersionKey(ctx));
  const { deviceCa } = loadServerCredentials(ctx.config);
  const { rows } = await ctx.db.query<{
    hash_id: string;
    environment_id: number;
    env_hash_id: string;
    certificate: string;
    identifier: string;
    identifier_hash: string;
  }>(
    `SELECT s.hash_id, s.environment_id, e.hash_id AS env_hash_id, s.certificate, s.identifier, s.identifier_hash
       FROM supplier_certificate s JOIN environment e ON e.id = s.environment_id
      WHERE s.deleted_at IS NULL AND e.deleted_at IS NULL ORDER BY s.id`,
  );
  const suppliers: SupplierAnchor[] = [];
  for (const r of rows) {
    const certificate = new X509Certificate(r.certificate);
    // only what our own device CA signed is an anchor (a CA key rotation leaves older ones out)
    if (certificate.checkIssued(deviceCa) && certificate.verify(deviceCa.publicKey)) {
      suppliers.push({
        hashId: r.hash_id,
        environmentId: Number(r.environment_id),
        environmentHashId: r.env_hash_id,
        certificate,
        identifier: r.identifier,
        identifierHash: r.identifier_hash,
      });
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
  state.checkedAt = Date.now();
  for (const listener of state.listeners) {
    try {
      listener(snapshot);
    } catch (err) {
      ctx.log.error({ err: (err as Error).message }, 'a trust anchor listener failed');
    }
  }
  return snapshot;
}

/** Loads the anchors with a query that starts after this call (loads run one at a time; requests made meanwhile share the next). */
function reload(ctx: AppContext): Promise<TrustSnapshot> {
  const state = stateOf(ctx);
  const start = (): Promise<TrustSnapshot> => {
    const p: Promise<TrustSnapshot> = load(ctx).finally(() => {
      if (state.loading === p) state.loading = null;
    });
    state.loading = p;
    return p;
  };
  if (!state.loading) return start();
  state.queued ??= state.loading
    .catch(() => undefined)
    .then(() => {
      state.queued = null;
      return start();
    });
  return state.queued;
}

/** Reloads when the version counter moved since the snapshot was read. */
async function check(ctx: AppContext): Promise<TrustSnapshot> {
  const state = stateOf(ctx);
  const version = await ctx.redis.get(trustVersionKey(ctx));
  state.checkedAt = Date.now();
  if (state.snapshot && version === state.version) return state.snapshot;
  return reload(ctx);
}

/**
 * The current trust anchors. In a process that watches them (watchTrust) that is the set in
 * memory; elsewhere the version counter is checked first when the last check is older than TRUST_CHECK_MS.
 */
export async function currentTrust(ctx: AppContext): Promise<TrustSnapshot> {
  const state = stateOf(ctx);
  if (state.watch) await state.watch.started.catch(() => undefined);
  if (state.queued) return state.queued;
  if (state.loading) return state.loading;
  if (state.snapshot && (state.watch || Date.now() - state.checkedAt < TRUST_CHECK_MS)) return state.snapshot;
  return state.snapshot ? check(ctx) : reload(ctx);
}

/**
 * The trust anchors now, without waiting (the DTLS server's `trustAnchors` option): the set in
 * memory, which watchTrust keeps current. Before the first load, the device CA alone.
 */
export function trustAnchors(ctx: AppContext): X509Certificate[] {
  const state = stateOf(ctx);
  if (!state.watch && state.snapshot && Date.now() - state.checkedAt >= TRUST_CHECK_MS) {
    // a context nobody watches (tools, tests) catches up on its next call
    currentTrust(ctx).catch((err: Error) => ctx.log.warn({ err: err.message }, 'trust anchors could not be reloaded'));
  }
  return state.snapshot?.anchors ?? [loadServerCredentials(ctx.config).deviceCa];
}

/** Calls `listener` after each load of this context's anchors; returns the function that stops it. */
export function onTrustLoaded(ctx: AppContext, listener: (snapshot: TrustSnapshot) => void): () => void {
  const { listeners } = stateOf(ctx);
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/**
 * Keeps this context's trust anchors current until every returned handle is stopped: loads them
 * now, reloads when a change is announced, checks the version counter every TRUST_CHECK_MS and
 * reloads fully every TRUST_RELOAD_MS. Resolves once the announcements are subscribed and a first load was tried.
 */
export async function watchTrust(ctx: AppContext): Promise<{ stop(): Promise<void> }> {
  const state = stateOf(ctx);
  if (state.watch) {
    state.watch.users++;
  } else {
    const warn = (err: Error) => ctx.log.warn({ err: err.message }, 'trust anchors could not be reloaded');
    // one check at a time: while Redis is away its commands wait, and checks would pile up behind them
    let checking = false;
    const timers = [
      setInterval(() => {
        if (checking) return;
        checking = true;
        check(ctx)
          .catch(warn)
          .finally(() => {
            checking = false;
          });
      }, TRUST_CHECK_MS),
      setInterval(() => {
        reload(ctx).catch(warn);
      }, TRUST_RELOAD_MS),
    ];
    for (const t of timers) t.unref();
    // subscribed before the first load: a change committed after the load's query is heard (trustChanged)
    const started = ctx.changes
      .listen()
      .then(() => reload(ctx))
      .then(() => undefined);
    state.watch = { users: 1, timers, started };
  }
  const watch = state.watch;
  let stopped = false;
  // not loaded (no device CA yet, database away): the timers keep trying; certificate devices are refused meanwhile
  await watch.started.catch((err: Error) => ctx.log.warn({ err: err.message }, 'trust anchors could not be loaded; retrying'));
  async function unwatch(): Promise<void> {
    if (stopped) return;
    stopped = true;
    if (--watch.users > 0) return;
    if (state.watch === watch) state.watch = null;
    for (const t of watch.timers) clearInterval(t);
  }
  return { stop: unwatch };
}

/**
 * A `trust` change (src/app/changes.ts): a supplier certificate was added, deleted or re-identified and committed.
 * Made here: the version counter moves (for the processes whose subscriber was away) and these anchors are reloaded
 * before the change is answered. Made elsewhere, or possibly missed (null): a watching process reloads.
 */
export async function trustChanged(ctx: AppContext, origin: 'local' | 'remote'): Promise<void> {
  const state = stateOf(ctx);
  if (origin === 'local') await ctx.redis.incr(trustVersionKey(ctx));
  if (state.snapshot || state.loading || state.watch) await reload(ctx);
}
