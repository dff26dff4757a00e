/**
 * Runs ns-devices.ts as a child process: inside the fleet's network namespace when it has one (nft balancer: the
 * devices' network, where the VIP is), else on this machine (nginx), and reads what it says.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Fleet } from '../../../scripts/fleet/topology.ts';
import type { ReportingDevice } from '../../support/report-world.ts';
import type { NsDeviceCounts, NsDevicesConfig, NsReport } from './ns-devices.ts';

const SCRIPT = path.join(import.meta.dirname, 'ns-devices.ts');

export interface DevicesDone {
  records: NsReport[];
  devices: NsDeviceCounts[];
}

export interface DevicesRun {
  child: ChildProcess;
  /** reports answered so far (updated every 250 ms) */
  answered: number;
  /** resolves once `answered` reaches `n` */
  answeredAtLeast(n: number, timeoutMs?: number): Promise<void>;
  /** asks the devices to stop after their current report; their records and counts */
  stop(): Promise<DevicesDone>;
}

let firstNumber = 1;

/** Starts `devices` (`cid[i]`: device i negotiates a Connection ID) and resolves once every one has made its handshake. */
export async function runDevices(
  fleet: Fleet,
  dir: string,
  devices: ReportingDevice[],
  cid: (i: number) => boolean,
  o: { periodMs: number; ackTimeoutMs: number },
): Promise<DevicesRun> {
  const config: NsDevicesConfig = {
    host: fleet.deviceHost,
    port: fleet.ports.coaps,
    periodMs: o.periodMs,
    ackTimeoutMs: o.ackTimeoutMs,
    firstNumber,
    devices: devices.map((d, i) => ({ identity: d.identity, key: d.key.toString('hex'), cid: cid(i) })),
  };
  firstNumber += 1_000_000;
  const file = path.join(dir, `devices-${firstNumber}.json`);
  writeFileSync(file, JSON.stringify(config));
  const node = [process.execPath, '--disable-warning=ExperimentalWarning', SCRIPT, file];
  const [bin, ...args] = fleet.namespace ? ['ip', 'netns', 'exec', fleet.namespace, ...node] : node;
  const child = spawn(bin, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  let done: ((d: DevicesDone) => void) | null = null;
  const finished = new Promise<DevicesDone>((resolve) => {
    done = resolve;
  });
  let ready!: () => void;
  const isReady = new Promise<void>((resolve) => {
    ready = resolve;
  });
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`the devices' process exited (${code})`))));
  exited.catch(() => undefined);
  const run: DevicesRun = {
    child,
    answered: 0,
    async answeredAtLeast(n, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      while (run.answered < n) {
        if (child.exitCode !== null) throw new Error("the devices' process exited");
        if (Date.now() > deadline) throw new Error(`only ${run.answered} of ${n} reports answered in time`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      child.stdin!.write('stop\n');
      return Promise.race([finished, exited]);
    },
  };
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const m = JSON.parse(line) as { event: string; answered?: number } & DevicesDone;
    if (m.event === 'ready') ready();
    else if (m.event === 'progress') run.answered = m.answered!;
    else if (m.event === 'done') done!({ records: m.records, devices: m.devices });
  });
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the devices did not all connect in time')), 60_000).unref());
  try {
    await Promise.race([isReady, exited, timeout]);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  return run;
}
