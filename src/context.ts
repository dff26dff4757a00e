// The composition root's context: the kernel's stores (src/app/bootstrap.ts), with the caches that hold what
// features change listening on the change bus (src/app/changes.ts). Every process, tool, test and bench that needs a
// context builds it here, so no cache is left deaf to the changes it holds.
import { openStores, closeContext } from './app/bootstrap.ts';
import type { Config } from './app/config.ts';
import type { AppContext } from './app/context.ts';
import type { Logger } from './app/logger.ts';
import { forgetCredentials } from './connectivity/devices/credentials.ts';
import { trustChanged } from './connectivity/supplier-certificates/trust.ts';

export { closeContext };

/** Opens the stores a process needs, derives its keys and wires the caches to the change bus. */
export async function createContext(config: Config, log?: Logger): Promise<AppContext> {
  const ctx = await openStores(config, log);
  wireCaches(ctx);
  return ctx;
}

/**
 * The caches every process has. A device-context loader (src/pipeline/device-context.ts) subscribes itself while
 * a worker watches; these two are shared by every role:
 * - PSK credentials are cached in Redis for every process, so the process that made the change drops them;
 * - the trust anchors are per process: the changing one moves the version counter and reloads, the watching
 *   gateways reload when they hear it.
 */
export function wireCaches(ctx: AppContext): void {
  ctx.changes.on('credentials', (change, origin) => (origin === 'local' && change ? forgetCredentials(ctx, change.identities) : undefined));
  ctx.changes.on('trust', (_change, origin) => trustChanged(ctx, origin));
}
