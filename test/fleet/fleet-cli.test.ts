// `npm run fleet` as an operator runs it: the script started as a process of its own, then `status`, `restart` and
// `stop` from other processes through its control socket. One small fleet (an API node, one gateway, one worker).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetStatus } from '../../scripts/fleet/control.ts';
import { freePort } from '../../scripts/fleet/ports.ts';
import { until } from '../support/until.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SCRIPT = path.join(ROOT, 'scripts/fleet.ts');
const run = promisify(execFile);

let dir: string;
let fleetProcess: ChildProcess;
let output = '';
const ports: Record<'api' | 'https' | 'coaps', number> = { api: 0, https: 0, coaps: 0 };

/** `npm run fleet -- <args> --dir <dir>` from another process, as a second shell would run it. */
const fleetCommand = (...args: string[]) => run(process.execPath, ['--disable-warning=ExperimentalWarning', SCRIPT, ...args, '--dir', dir], { cwd: ROOT });
const status = async (): Promise<FleetStatus> => JSON.parse((await fleetCommand('status', '--json')).stdout) as FleetStatus;

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};
const parentOf = (pid: number): number => Number(/^\d+ \(.*\) \S (\d+)/.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))![1]);
const environment = (pid: number): string[] => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
/** Processes whose command line names the fleet's folder: nginx's master and workers (-p <dir>/nginx). */
const processesOfDir = (): number[] =>
  readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(dir) && alive(Number(p));
      } catch {
        return false;
      }
    })
    .map(Number);

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-fleet-cli-'));
  for (const name of ['api', 'https', 'coaps'] as const) ports[name] = await freePort();
  fleetProcess = spawn(
    process.execPath,
    [
      '--disable-warning=ExperimentalWarning',
      SCRIPT,
      '--dir',
      dir,
      '--gateways',
      '1',
      '--workers',
      '1',
      '--api-port',
      String(ports.api),
      '--https-port',
      String(ports.https),
      '--coaps-port',
      String(ports.coaps),
      // nginx: this test follows nginx's processes (the nft balancer, the default as root, is test/fleet/nft-balancer.test.ts's)
      '--balancer',
      'nginx',
    ],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATABASE_URL: process.env.DATABASE_URL,
        REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
        SECRET_KEY: '45'.repeat(32),
        QUEUE_NAME: `fleet-cli-${process.pid}`,
        CERTS_DIR: path.join(dir, 'certs'),
        LOG_LEVEL: 'warn',
        // settings the fleet used to drop: they must reach the nodes
        QUEUE_SHARDS: '2',
        SHUTDOWN_GRACE_MS: '3000',
        DTLS_MAX_SESSIONS_PER_ADDRESS: '77',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  fleetProcess.stdout!.on('data', (d: Buffer) => {
    output += d.toString();
  });
  fleetProcess.stderr!.on('data', (d: Buffer) => {
    output += d.toString();
  });
  await until(async () => existsSync(path.join(dir, 'fleet.json')) || fleetProcess.exitCode !== null, Boolean, 'fleet.json', 120_000);
  if (fleetProcess.exitCode !== null) throw new Error(`the fleet exited (${fleetProcess.exitCode}): ${output}`);
}, 150_000);

afterAll(async () => {
  if (fleetProcess && fleetProcess.exitCode === null && fleetProcess.signalCode === null) {
    const gone = new Promise((r) => fleetProcess.once('exit', r));
    fleetProcess.kill('SIGINT');
    await gone;
  }
}, 60_000);

describe('npm run fleet from the command line', () => {
  it('prints every process with its pid, ports and log file, and writes them to fleet.json', async () => {
    await until(
      async () => output,
      (o) => o.includes('fleet.json'),
      'the start-up table',
    );
    const written = JSON.parse(readFileSync(path.join(dir, 'fleet.json'), 'utf8')) as FleetStatus;
    expect(written.processes.map((p) => p.name)).toEqual(['nginx', 'api-1', 'gateway-1', 'worker-1']);
    expect(written.pid).toBe(fleetProcess.pid);
    expect(written.processes[0].ports).toEqual(ports);
    for (const p of written.processes) {
      expect(output).toMatch(new RegExp(`^${p.name} +pid ${p.pid} +running .*${p.log.replaceAll('.', '\\.')}$`, 'm'));
      expect(existsSync(p.log), p.log).toBe(true);
    }
  });

  it('status, from another process, names live processes; the settings of the environment reached the nodes', async () => {
    const answer = await status();
    for (const p of answer.processes) {
      expect(p.running, p.name).toBe(true);
      expect(alive(p.pid!), p.name).toBe(true);
    }
    const gateway = answer.processes.find((p) => p.name === 'gateway-1')!;
    expect(environment(gateway.pid!)).toEqual(
      expect.arrayContaining(['QUEUE_SHARDS=2', 'SHUTDOWN_GRACE_MS=3000', 'DTLS_MAX_SESSIONS_PER_ADDRESS=77', 'API_HOST=127.0.0.1']),
    );
    expect((await fetch(`http://127.0.0.1:${ports.api}/health`)).ok).toBe(true);
  });

  it('restart, from another process, starts the node again as a child of the fleet', async () => {
    const before = (await status()).processes.find((p) => p.name === 'gateway-1')!;
    await fleetCommand('restart', 'gateway-1');
    const after = (await status()).processes.find((p) => p.name === 'gateway-1')!;
    expect(after.pid).not.toBe(before.pid);
    expect(alive(before.pid!)).toBe(false);
    expect(alive(after.pid!)).toBe(true);
    expect(parentOf(after.pid!)).toBe(fleetProcess.pid);
    const written = JSON.parse(readFileSync(path.join(dir, 'fleet.json'), 'utf8')) as FleetStatus;
    expect(written.processes.find((p) => p.name === 'gateway-1')!.pid).toBe(after.pid);
  }, 60_000);

  it('roll restarts every gateway node; kill leaves a node stopped', async () => {
    const before = (await status()).processes.find((p) => p.name === 'gateway-1')!;
    await fleetCommand('roll');
    const rolled = (await status()).processes.find((p) => p.name === 'gateway-1')!;
    expect(rolled.pid).not.toBe(before.pid);
    expect(alive(rolled.pid!)).toBe(true);
    const worker = (await status()).processes.find((p) => p.name === 'worker-1')!;
    await fleetCommand('kill', 'worker-1', '--signal', 'SIGKILL');
    expect((await status()).processes.find((p) => p.name === 'worker-1')).toMatchObject({ pid: worker.pid, running: false });
    expect(alive(worker.pid!)).toBe(false);
    await expect(fleetCommand('restart', 'gateway-9')).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('no node gateway-9') });
  }, 60_000);

  it('stop, from another process, leaves nothing of the fleet running', async () => {
    const written = JSON.parse(readFileSync(path.join(dir, 'fleet.json'), 'utf8')) as FleetStatus;
    const pids = [written.pid, ...written.processes.map((p) => p.pid!)];
    expect(processesOfDir().length).toBeGreaterThan(0);
    const exited = new Promise((r) => fleetProcess.once('exit', r));
    await fleetCommand('stop');
    await exited;
    for (const pid of pids) expect(alive(pid), String(pid)).toBe(false);
    expect(processesOfDir()).toEqual([]);
    expect(existsSync(path.join(dir, 'control.sock'))).toBe(false);
    await expect(fleetCommand('status')).rejects.toMatchObject({ code: 1, stderr: expect.stringContaining('no fleet is running') });
  }, 60_000);
});
