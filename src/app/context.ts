import type { ChangeBus } from './changes.ts';
import type { Config } from './config.ts';
import type { Db } from './db.ts';
import type { ServerKeys } from './keys.ts';
import type { Logger } from './logger.ts';
import type { Redis } from './redis.ts';

/** What the kernel opens for a process (src/app/bootstrap.ts openStores): configuration and the stores. */
export interface AppStores {
  config: Config;
  log: Logger;
  db: Db;
  redis: Redis;
  keys: ServerKeys;
  /** what changed that caches hold (src/app/changes.ts) */
  changes: ChangeBus;
}

/**
 * What every role is handed: the stores, and the per-context state of the features and runtimes (caches, queue
 * producers, sandboxes). Each of those declares its own field by merging it into this interface (`declare module`,
 * as the area settings merge into Config), so the kernel imports none of them; the composition root's createContext
 * (src/context.ts) builds every field. A context is therefore never a bare AppStores: nothing keeps state per context
 * on the side.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- the features' fields are merged in
export interface AppContext extends AppStores {}
