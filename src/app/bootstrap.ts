import { ChangeBus } from './changes.ts';
import type { Config } from './config.ts';
import type { AppStores } from './context.ts';
import { openDb } from './db.ts';
import { deriveKeys } from './keys.ts';
import { createLogger, type Logger } from './logger.ts';
import { createRedis } from './redis.ts';

/** Opens the stores a process needs and derives its keys; the composition root's createContext (src/context.ts) wires its caches. */
export async function openStores(config: Config, log: Logger = createLogger(config.logLevel)): Promise<AppStores> {
  const db = await openDb({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    log,
    idleTimeoutMillis: config.databaseIdleTimeoutMs,
    readUrl: config.databaseReadUrl,
  });
  const redis = createRedis(config, log);
  const changes = new ChangeBus({ redis, subscriber: () => createRedis(config, log), channel: `gridgate:changes:${config.queueName}`, log });
  return { config, log, db, redis, keys: deriveKeys(config.secretKey, config.internalToken), changes };
}

/** Closes what openStores opened (the composition root's closeContext closes the context's fields first). */
export async function closeStores(ctx: AppStores): Promise<void> {
  await ctx.changes.close();
  await ctx.redis.quit().catch(() => ctx.redis.disconnect());
  await ctx.db.close();
}
