// A redis-server of the test's own (no persistence) on `port`, to kill and start again under a running client.
import { spawn, type ChildProcess } from 'node:child_process';

const children: ChildProcess[] = [];
/** For afterAll: kills the redis-servers a test file started and left running. */
export function killPrivateRedis(): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

/** Starts redis-server on 127.0.0.1:`port` with its files in `dir`; resolves once it accepts connections. */
export async function startRedis(port: number, dir: string): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]);
  children.push(child);
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('Ready to accept connections')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`redis-server exited (${code}): ${out}`)));
  });
  return child;
}

/** Resolves when `child` has exited. */
export function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
}
