import type { AppContext } from '../app/context.ts';
import { recordGivenUpActivity, type ActivityRow } from '../connectivity/activities/store.ts';
import { publishStoredActivities } from '../connectivity/live/notice.ts';
import type { DeviceContextLoader } from './device-context.ts';
import type { DeviceAnswer, DeviceBatchJob, DeviceJobResult } from '../connectivity/device-jobs.ts';
import { derivedHashId, triggerTypeOf } from './process-device-job.ts';

const GAVE_UP_ANSWER: DeviceAnswer = {
  statusCode: 500,
  headers: {},
  body: { type: 'json', data: { key: 'server_error', message: 'The request could not be processed; it is kept for an operator to run again' } },
};

/**
 * A job failed for good: each of its items gets a failed activity saying so (under the id its run would have
 * used, so a later successful retry adds nothing twice) and a device still waiting gets a 500 instead of a 202.
 * Best effort: the job itself stays in the failed set, whatever happens here.
 */
export async function recordGivenUp(
  ctx: AppContext,
  loader: DeviceContextLoader,
  jobId: string,
  batch: DeviceBatchJob,
  err: Error,
  answer: (gatewayId: string, itemId: string, result: DeviceJobResult) => void,
): Promise<void> {
  await Promise.all(
    batch.items.map(async ({ itemId, job, idBase }, index) => {
      const activityHashId = derivedHashId(idBase ?? `${jobId}:${index}`, 'activity');
      if (job.kind === 'incomingRequest') answer(batch.gatewayId, itemId, { answer: GAVE_UP_ANSWER, activityHashId, failed: true });
      const device = await loader.device(job.deviceHashId).catch(() => null);
      if (!device) return;
      const now = new Date();
      const row: ActivityRow = {
        hashId: activityHashId,
        environmentId: device.environmentId,
        deviceId: device.id,
        deviceTypeId: device.deviceType.id,
        triggerType: triggerTypeOf(job),
        failed: true,
        activities: [],
        startedAt: now,
        finishedAt: now,
        triggerData: job.kind === 'event' ? job.event : { request: job.webRequest, response: GAVE_UP_ANSWER },
        log: [
          {
            type: 'error',
            message: `not processed: gave up after repeated failures (${err.message}); the job waits in the failed set for an operator (npm run admin -- retry-failed)`,
          },
        ],
      };
      // made storable on the way (src/connectivity/activities/store.ts): what the device sent may be what was refused
      await recordGivenUpActivity(ctx.db, row, ctx.config.supplierCode.maxActivityBytes).then(
        // the live log shows the run given up on as it shows every stored run
        () => publishStoredActivities(ctx, [row]),
        (e: Error) => ctx.log.error({ jobId, err: e.message }, 'the failed activity of a given-up job could not be written'),
      );
    }),
  );
}
