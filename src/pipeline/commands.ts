import type { AppContext } from '../app/context.ts';
import type { Queryable } from '../app/db.ts';
import type { Mailer } from '../mail/mailer.ts';
import type { DeviceRecord } from './device-context.ts';
import type { ExecCall } from '../sandbox/types.ts';
import { nameText } from '../app/names.ts';
import { countDeviceEvent } from '../connectivity/counters/recorder.ts';
import type { DeviceEventQueue } from './queue.ts';
import { queuedCommandEvents } from '../connectivity/commands/events.ts';
import { announceCommandsAdded, PendingCommandsHint } from '../connectivity/commands/pending-hint.ts';
import {
  addCommands,
  commandForEvent,
  dropCommand,
  markCommandSent,
  scheduledCommandsOf,
  type Command,
  type CommandRecord,
} from '../connectivity/commands/store.ts';
import type { CommandType } from '../connectivity/command-types/store.ts';

type Scheduled = { command: Command; commandType: CommandType };

/**
 * `args.scheduledCommands` for every run. A device the hint knows to have none gets none without a
 * query; the runs of one queue batch that must ask, ask together, so their devices are read in one
 * query (a device contact costs a share of one indexed query, not one each).
 */
export class ScheduledCommandsLoader {
  private waiting = new Map<number, ((list: Scheduled[]) => void)[]>();
  private failing: ((err: unknown) => void)[] = [];
  private scheduled = false;
  private readonly db: Queryable;
  private readonly hint: PendingCommandsHint | null;

  constructor(db: Queryable, hint: PendingCommandsHint | null = null) {
    this.db = db;
    this.hint = hint;
  }

  load(deviceId: number): Promise<Scheduled[]> {
    if (this.hint && !this.hint.mayHave(deviceId)) return Promise.resolve([]);
    return new Promise((resolve, reject) => {
      this.waiting.set(deviceId, [...(this.waiting.get(deviceId) ?? []), resolve]);
      this.failing.push(reject);
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    const waiting = this.waiting;
    const failing = this.failing;
    this.waiting = new Map();
    this.failing = [];
    this.scheduled = false;
    const epochs = new Map([...waiting.keys()].map((id) => [id, this.hint?.epochOf(id) ?? 0]));
    scheduledCommandsOf(this.db, [...waiting.keys()]).then(
      (byDevice) => {
        for (const [id, resolvers] of waiting) {
          const list = byDevice.get(id) ?? [];
          this.hint?.checked(id, epochs.get(id)!, list.length);
          for (const r of resolvers) r(list);
        }
      },
      (err) => {
        for (const f of failing) f(err);
      },
    );
  }
}

/** The handler's view of a command (plain JSON). */
const view = (r: Scheduled) => ({ command: { ...r.command }, commandType: { ...r.commandType } });
/** What a command call's activity shows (the SDK's markCommandAsSent triggerData). */
const shown = (r: CommandRecord) => ({ command: r.command, commandType: r.commandType });

function executedMail(r: CommandRecord, device: DeviceRecord, sentAt: Date) {
  const type = nameText(r.commandType.name);
  return {
    to: r.command.email,
    subject: `Command "${type}" sent to device ${device.supplierDeviceIdentifier}`,
    text: [
      `The device ${device.supplierDeviceIdentifier} (${device.hashId}) received command ${r.command.hashId} ("${type}") at ${sentAt.toISOString()}.`,
      r.command.startAt ? `It executes it at ${r.command.startAt}.` : `It executes it ${r.command.delay} s after receiving it.`,
      `Fields: ${JSON.stringify(r.command.fields)}`,
      r.command.channelIndices.length > 0 ? `Channels: ${r.command.channelIndices.join(', ')}` : '',
    ]
      .filter(Boolean)
      .join('\n'),
  };
}

const COMMAND_CALLS = new Set<ExecCall['name']>(['markCommandAsSent', 'dropCommand', 'scheduleCommand']);

/** What the worker needs of commands: scheduledCommands, the command of an event, and the exec calls on commands. */
export function commandPipeline(ctx: AppContext, mailer: Mailer, queue: DeviceEventQueue) {
  const hint = new PendingCommandsHint(ctx.db);
  const loader = new ScheduledCommandsLoader(ctx.db, hint);
  const events = queuedCommandEvents(queue, (ids) => announceCommandsAdded(ctx, ids));
  return {
    /** Loads the pending-commands hint and subscribes to announcements; until then every device is looked up. */
    start: () => hint.start(ctx),
    stop: () => hint.stop(),
    scheduledCommands: async (deviceId: number) => (await loader.load(deviceId)).map(view),
    async commandOfEvent(hashId: string) {
      const r = await commandForEvent(ctx.db, hashId);
      return r && { ...view(r), droppedAt: r.droppedAt };
    },
    handles: (call: ExecCall) => COMMAND_CALLS.has(call.name),
    /**
     * markCommandAsSent, dropCommand and scheduleCommand (a command for the device itself, made like
     * command add, its hashId the call's own so a retried job adds it once). Returns the activity's triggerData.
     */
    async apply(device: DeviceRecord, call: ExecCall, at: Date, callHashId: string): Promise<unknown> {
      if (call.name === 'markCommandAsSent') {
        const sent = await markCommandSent(ctx.db, device.id, call.args.commandHashId, at);
        // null: sent by an earlier try of this job, which counted and mailed already
        if (!sent) return {};
        countDeviceEvent(ctx, device.hashId, 'commandsSent', at);
        if (sent.command.email.length > 0) mailer.send({ ...executedMail(sent, device, at), environmentId: device.environmentId });
        return shown(sent);
      }
      if (call.name === 'dropCommand') {
        // the SDK's dropCommand activity also says what the drop did
        const dropped = await dropCommand(ctx.db, device.id, call.args.commandHashId, call.args.markAsDeleted);
        return { ...shown(dropped), removeFromScheduledCommands: true, markAsDeleted: call.args.markAsDeleted };
      }
      if (call.name === 'scheduleCommand') {
        const [hashId] = await addCommands(
          ctx.db,
          events,
          device.environmentId,
          null,
          {
            objectType: 'device',
            objectHashIds: [device.hashId],
            commandTypeHashId: call.args.commandTypeHashId,
            fields: call.args.fields,
            startAt: call.args.startAt,
            endAt: call.args.endAt,
            channelIndices: call.args.channelIndices ?? [],
            email: [],
          },
          [callHashId],
        );
        const added = hashId === undefined ? null : await commandForEvent(ctx.db, hashId);
        return added ? shown(added) : {};
      }
      throw new Error(`exec.${call.name} is not a command call`);
    },
  };
}
