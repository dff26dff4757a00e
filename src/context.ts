// The composition root's context: the kernel's stores (src/app/bootstrap.ts), and every feature's and runtime's state
// per context as a field of it (each declares its field on AppContext where it lives), with the caches that hold
// what features change listening on the change bus (src/app/changes.ts). Every process, tool, test and bench that
// needs a context builds it here, so no cache is left deaf to the changes it holds and no module keeps state per
// context on the side: two contexts in one process share nothing but the process.
import { closeStores, openStores } from './app/bootstrap.ts';
import type { Config } from './app/config.ts';
import type { AppContext, AppStores } from './app/context.ts';
import type { Logger } from './app/logger.ts';
import { createCounterRecorder } from './connectivity/counters/recorder.ts';
import { forgetCredentials } from './connectivity/devices/credentials.ts';
import { createTrustState, trustChanged } from './connectivity/supplier-certificates/trust.ts';
import { createIdentityState, disposeCertificateIdentity } from './gateway/device-identity.ts';
import { createFirmwareState } from './gateway/firmware.ts';
import { MailProducer } from './mail/queue.ts';
import { ExportProducer } from './monitoring/exports/queue.ts';
import { ThresholdCache } from './monitoring/thresholds/cache.ts';
import { SupplierAlerts } from './notifications/supplier-alerts.ts';
import { DryRuns } from './pipeline/dry-run/run.ts';
import { createLocalHandoff } from './pipeline/queue.ts';

/** Opens the stores a process needs, derives its keys, builds the context's fields and wires the caches to the change bus. */
export async function createContext(config: Config, log?: Logger): Promise<AppContext> {
  const stores = await openStores(config, log);
  const ctx = contextOf(stores);
  wireCaches(ctx);
  return ctx;
}

/**
 * Every field of a context on these stores. Cheap: nothing here opens a connection or starts a timer; what does
 * (the queue producers, the sandboxes) is made by its holder on first use and closed by closeContext.
 */
function contextOf(stores: AppStores): AppContext {
  const mail = new MailProducer(stores);
  return {
    ...stores,
    mail,
    exports: new ExportProducer(stores),
    supplierAlerts: new SupplierAlerts({ ...stores, mail }),
    counters: createCounterRecorder(stores),
    trust: createTrustState(),
    thresholds: new ThresholdCache(() => stores.changes.listen()),
    firmware: createFirmwareState(stores),
    certificateIdentity: createIdentityState(),
    dryRuns: new DryRuns(stores),
    localHandoff: createLocalHandoff(),
  };
}

/**
 * The caches every process has. A device-context loader (src/pipeline/device-context.ts) subscribes itself while
 * a worker watches; these are shared by every role:
 * - PSK credentials are cached in Redis for every process, so the process that made the change drops them;
 * - the trust anchors are per process: the changing one moves the version counter and reloads, the watching
 *   gateways reload when they hear it;
 * - the report path's thresholds are per process: each forgets what the change names (a process that reads them
 *   subscribes on its first load).
 */
export function wireCaches(ctx: AppContext): void {
  ctx.changes.on('credentials', (change, origin) => (origin === 'local' && change ? forgetCredentials(ctx, change.identities) : undefined));
  ctx.changes.on('trust', (_change, origin) => trustChanged(ctx, origin));
  ctx.changes.on('thresholds', (change) => ctx.thresholds.forget(change));
}

/**
 * Closes what the context's fields opened on first use (the queue producers, the sandboxes), then its stores. What
 * waits to be written (counts, alerts, contacts) is the roles' to flush when they stop (src/service.ts).
 */
export async function closeContext(ctx: AppContext): Promise<void> {
  disposeCertificateIdentity(ctx);
  await Promise.allSettled([ctx.dryRuns.dispose(), ctx.mail.close(), ctx.exports.close()]);
  await closeStores(ctx);
}
