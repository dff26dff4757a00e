// The service as operators run it: src/main.ts in a child process, and the admin CLI beside it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { expect } from 'vitest';
import { freePort } from './ports.ts';

export { freePort };
export const MAIN = path.resolve(import.meta.dirname, '../../src/main.ts');
const ROOT = path.resolve(import.meta.dirname, '../..');

const children: ChildProcess[] = [];
/** For afterAll: kills the service processes a test file started and left running (all of an `npm start`'s process group). */
export function killServiceProcesses(): void {
  for (const c of children) {
    if (c.spawnargs[0] === 'npm') {
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    } else if (c.exitCode === null) c.kill('SIGKILL');
  }
}

export interface ServiceProcess {
  child: ChildProcess;
  base: string;
  apiPort: number;
  httpsPort: number;
  exited: Promise<number | null>;
  /** what the process wrote on stdout (its JSON log) so far */
  stdout(): string;
}

/**
 * Spawns `src/main.ts` (or, with `npm`, `npm start` in the project folder, in a process group of its own) with `env`
 * (and nothing else from this one's; ports chosen here unless given) and waits until its /health answers 200 (unless
 * `waitHealthy` is false).
 */
export async function startServiceProcess(
  env: Record<string, string>,
  args: string[] = [],
  opts: { children?: ChildProcess[]; waitHealthy?: boolean; npm?: boolean } = {},
): Promise<ServiceProcess> {
  const apiPort = env.API_PORT ? Number(env.API_PORT) : await freePort();
  const httpsPort = env.HTTPS_DEVICE_PORT ? Number(env.HTTPS_DEVICE_PORT) : await freePort();
  const [command, argv] = opts.npm
    ? ['npm', ['start', '--silent', '--', ...args]]
    : [process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, ...args]];
  const child = spawn(command, argv, {
    cwd: ROOT,
    detached: opts.npm === true,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      LOG_LEVEL: 'warn',
      QUEUE_NAME: `svc-${process.pid}-${apiPort}`,
      SECRET_KEY: '33'.repeat(32),
      COAPS_PORT: '0',
      ...env,
      API_PORT: String(apiPort),
      HTTPS_DEVICE_PORT: String(httpsPort),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  opts.children?.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const base = `http://127.0.0.1:${apiPort}`;
  const proc = { child, base, apiPort, httpsPort, exited, stdout: () => out };
  if (opts.waitHealthy === false) return proc;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`service exited with ${child.exitCode}: ${out}`);
    const ok = await fetch(`${base}/health`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return proc;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('service did not become healthy');
}

/** The service with `env`, every role, once healthy. */
export const startProcess = (env: Record<string, string>, args: string[] = []): Promise<ServiceProcess> => startServiceProcess(env, args);

/** `npm run admin -- args`: its one line of JSON. */
export function admin(env: Record<string, string>, ...args: string[]): Record<string, string> {
  const out = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, 'admin', ...args], {
    env: { PATH: process.env.PATH, SECRET_KEY: '33'.repeat(32), ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (out.status !== 0) throw new Error(out.stderr);
  const lines = out.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]);
}
