import { newHashId } from '../../app/hash-id.ts';
import type { DeviceEventJob } from '../device-jobs.ts';
import type { CommandEvents, CommandRecord } from './store.ts';

/** The fixed id of a command's delayed commandDue job, so deleting the command can take it back. */
export const commandDueJobId = (commandHashId: string) => `commandDue-${commandHashId}`;

/** When the device should execute the command: startAt, or add time + delay. */
export function dueAt(r: CommandRecord): number {
  return r.command.startAt !== null ? Date.parse(r.command.startAt) : Date.parse(r.command.createdAt) + r.command.delay * 1000;
}

function eventJob(r: CommandRecord, type: 'newCommand' | 'commandDue' | 'deletedCommand'): DeviceEventJob {
  return {
    kind: 'event',
    eventId: newHashId(16),
    deviceHashId: r.command.deviceHashId,
    environmentHashId: r.environmentHashId,
    event: { type, commandHashId: r.command.hashId },
    queuedAt: new Date().toISOString(),
  };
}

/** Where command events go: the device event queue of the pipeline (src/pipeline/queue.ts), given by the composition root. */
export interface CommandEventQueue {
  add(jobs: { job: DeviceEventJob; opts?: { delayMs?: number; jobId?: string } }[]): Promise<void>;
  /** takes back a delayed job by its id */
  remove(jobId: string): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * Command lifecycle events as queued jobs: newCommand now, commandDue as a delayed job, deletedCommand now.
 * `announce` first tells the workers' pending-commands hints which devices got commands.
 */
export function queuedCommandEvents(queue: CommandEventQueue, announce: (deviceIds: number[]) => Promise<void>): CommandEvents {
  return {
    async added(records) {
      await announce([...new Set(records.map((r) => r.deviceId))]);
      const now = Date.now();
      await queue.add(
        records.flatMap((r) => [
          { job: eventJob(r, 'newCommand') },
          { job: eventJob(r, 'commandDue'), opts: { delayMs: Math.max(0, dueAt(r) - now), jobId: commandDueJobId(r.command.hashId) } },
        ]),
      );
    },
    async deleted(r) {
      await queue.remove(commandDueJobId(r.command.hashId));
      await queue.add([{ job: eventJob(r, 'deletedCommand') }]);
    },
  };
}
