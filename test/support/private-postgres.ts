import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.ts';

/** A PostgreSQL server of the test's own (Debian's binaries), to stop and start under load; a primary a standby can follow (test/support/pg-standby.ts). */
export interface PrivatePostgres {
  url: string;
  port: number;
  /** `pg_ctl stop -m immediate`: the server dies as in a crash; clients see their connections cut */
  kill(): void;
  /** `kill()` without blocking this process while pg_ctl runs: the test's own requests go on as PostgreSQL goes away */
  killAsync(): Promise<void>;
  start(): void;
  destroy(): void;
}

/** The directory of Debian's PostgreSQL binaries (the newest version installed). */
export function binDir(): string {
  const root = '/usr/lib/postgresql';
  const version = readdirSync(root).sort((a, b) => Number(b) - Number(a))[0];
  return path.join(root, version, 'bin');
}

/**
 * Runs PostgreSQL's `tool` on files under `dir`: as the postgres user when this process is root (PostgreSQL
 * refuses to run as root; `dir` is given to that user), else as this user. Throws with the tool's output on failure.
 */
export function pgTool(dir: string): (tool: string, args: string[]) => void {
  const bin = binDir();
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { uid, gid } = {
      uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
      gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })),
    };
    chownSync(dir, uid, gid);
  }
  return (tool, args) => {
    const [cmd, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', path.join(bin, tool), ...args]] : [path.join(bin, tool), args];
    const out = spawnSync(cmd, argv, { encoding: 'utf8', timeout: 60_000 });
    if (out.status !== 0) throw new Error(`${tool} failed: ${out.stderr || out.stdout}`);
  };
}

/** `pgTool` (on files `pgTool` has given the postgres user) without blocking: this process's event loop goes on while the tool runs; rejects with its output on failure. */
export function pgToolAsync(): (tool: string, args: string[]) => Promise<void> {
  const bin = binDir();
  const asRoot = process.getuid?.() === 0;
  return (tool, args) =>
    new Promise((resolve, reject) => {
      const [cmd, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', path.join(bin, tool), ...args]] : [path.join(bin, tool), args];
      execFile(cmd, argv, { encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`${tool} failed: ${stderr || stdout || err.message}`)) : resolve(),
      );
    });
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-pg-'));
  const data = path.join(dir, 'data');
  const port = await freePort();
  const run = pgTool(dir);
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const start = () =>
    run('pg_ctl', [
      '-D',
      data,
      '-w',
      '-t',
      '60',
      '-l',
      path.join(dir, 'log'),
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100 -c wal_level=replica -c max_wal_senders=5`,
      'start',
    ]);
  start();
  run('createdb', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', 'gridgate']);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/gridgate`,
    port,
    kill: () => run('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']),
    killAsync: () => pgToolAsync()('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']),
    start,
    destroy: () => {
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']);
      } catch {
        /* stopped already */
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
