// Builds the browser console (console/ → dist/console) when a source is newer than the last build, or when
// asked to (`--force`). npm start and the test command run it, so a fresh clone serves the console with no
// third command; an unchanged console costs a directory walk (a few ms).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stamp = path.join(root, 'dist/console/.built');

function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return latest;
}

export function consoleIsStale() {
  if (!existsSync(stamp)) return true;
  const sources = Math.max(newest(path.join(root, 'console')), statSync(path.join(root, 'package-lock.json')).mtimeMs);
  return sources > statSync(stamp).mtimeMs;
}

/** Builds when stale (or forced); returns whether it built. Throws when Vite fails. */
export function buildConsole({ force = false, node = process.execPath, quiet = false } = {}) {
  if (!force && !consoleIsStale()) return false;
  const vite = path.join(root, 'node_modules/vite/bin/vite.js');
  if (!existsSync(vite)) {
    if (!quiet) console.error('console: Vite is not installed (npm install without --omit=dev builds it); the API runs without the console');
    return false;
  }
  const started = Date.now();
  // Vite refuses a second build of the project while one runs (two test runs, a test run beside npm start): wait for it
  for (let attempt = 0; ; attempt++) {
    const run = spawnSync(node, [vite, 'build', '--config', path.join(root, 'console/vite.config.ts'), '--logLevel', 'warn'], { cwd: root, encoding: 'utf8' });
    const output = `${run.stdout ?? ''}${run.stderr ?? ''}`;
    if (run.status === 0) {
      if (!quiet && output.trim()) process.stderr.write(output);
      break;
    }
    if (!/Found another Vite build process/.test(output) || attempt >= 240) throw new Error(`vite build failed:\n${output}`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
  }
  writeFileSync(stamp, new Date().toISOString());
  if (!quiet) console.error(`console: built in ${((Date.now() - started) / 1000).toFixed(1)} s (dist/console)`);
  return true;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) buildConsole({ force: process.argv.includes('--force') });
