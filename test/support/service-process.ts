// The service as operators run it: src/main.ts in a child process, and the admin CLI beside it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { expect } from 'vitest';

export const MAIN = path.resolve(import.meta.dirname, '../../src/main.ts');
const children: ChildProcess[] = [];
/** For afterAll: kills the service processes a test file started and left running. */
export function killServiceProcesses(): void {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** The service (src/main.ts) as a child process with `env` (and nothing else from this one's), once /health answers 200. */
export async function startProcess(env: Record<string, string>, args: string[] = []): Promise<{ child: ChildProcess; base: string; httpsPort: number; exited: Promise<number | null> }> {
  const apiPort = await freePort();
  const httpsPort = await freePort();
  const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, ...args], {
    env: { PATH: process.env.PATH, REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', LOG_LEVEL: 'warn', QUEUE_NAME: `svc-${process.pid}-${apiPort}`, SECRET_KEY: '33'.repeat(32), API_PORT: String(apiPort), HTTPS_DEVICE_PORT: String(httpsPort), COAPS_PORT: '0', ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const base = `http://127.0.0.1:${apiPort}`;
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`service exited with ${child.exitCode}`);
    const ok = await fetch(`${base}/health`).then((r) => r.status === 200, () => false);
    if (ok) return { child, base, httpsPort, exited };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('service did not become healthy');
}

/** `npm run admin -- args`: its one line of JSON. */
export function admin(env: Record<string, string>, ...args: string[]): Record<string, string> {
  const out = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, 'admin', ...args], { env: { PATH: process.env.PATH, SECRET_KEY: '33'.repeat(32), ...env }, encoding: 'utf8' });
  if (out.status !== 0) throw new Error(out.stderr);
  const lines = out.stdout.trim().split('\n');
  expect(lines).toHaveLength(1);
  return JSON.parse(lines[0]);
}

