import type { ChangeBus } from './changes.ts';
import type { Config } from './config.ts';
import type { Db } from './db.ts';
import type { ServerKeys } from './keys.ts';
import type { Logger } from './logger.ts';
import type { Redis } from './redis.ts';

/** What every role is handed: configuration and the stores. */
export interface AppContext {
  config: Config;
  log: Logger;
  db: Db;
  redis: Redis;
  keys: ServerKeys;
  /** what changed that caches hold (src/app/changes.ts) */
  changes: ChangeBus;
}
