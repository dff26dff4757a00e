// The live log's notices: what the worker publishes once a batch of activities is stored, one message per
// environment and batch on that environment's channel. A notice is small (ids and times); an API process that
// streams the environment loads the activity itself, by hashId, in the shape of GET /supplier-activity/:hashId.

import type { AppContext } from '../../app/context.ts';
import { liveActivityChannel } from '../../app/redis-keys.ts';
import type { ActivityRow } from '../activities/store.ts';

/** One stored activity, as its environment's channel carries it. */
export interface ActivityNotice {
  hashId: string;
  deviceId: number | null;
  deviceTypeId: number | null;
  triggerType: string;
  /** when the run started and finished (ms since the epoch, the worker's clock) */
  startedAt: number;
  finishedAt: number;
}

/**
 * Publishes the notices of stored activities. Never throws: a live log is a view, so a notice Redis does
 * not take is lost (and logged) rather than failing the device's job.
 */
export async function publishStoredActivities(ctx: Pick<AppContext, 'redis' | 'config' | 'log'>, rows: ActivityRow[]): Promise<void> {
  const byEnvironment = new Map<number, ActivityNotice[]>();
  for (const r of rows) {
    const list = byEnvironment.get(r.environmentId) ?? [];
    list.push({
      hashId: r.hashId,
      deviceId: r.deviceId,
      deviceTypeId: r.deviceTypeId,
      triggerType: r.triggerType,
      startedAt: r.startedAt.getTime(),
      finishedAt: r.finishedAt.getTime(),
    });
    byEnvironment.set(r.environmentId, list);
  }
  await Promise.all(
    [...byEnvironment].map(([environmentId, notices]) => ctx.redis.publish(liveActivityChannel(ctx.config, environmentId), JSON.stringify(notices))),
  ).catch((err: Error) => ctx.log.warn({ err: err.message }, 'live log notices could not be published'));
}
