// Builds the browser console (console/ → dist/console) when a source is newer than the last build, or when
// asked to (`--force`). npm start and the test command run it, so a fresh clone serves the console with no
// third command; an unchanged console costs a directory walk (a few ms).
import { execFileSync } from 'node:child_process';
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
  execFileSync(node, [vite, 'build', '--config', path.join(root, 'console/vite.config.ts'), '--logLevel', 'warn'], { cwd: root, stdio: quiet ? 'ignore' : 'inherit' });
  writeFileSync(stamp, new Date().toISOString());
  if (!quiet) console.error(`console: built in ${((Date.now() - started) / 1000).toFixed(1)} s (dist/console)`);
  return true;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) buildConsole({ force: process.argv.includes('--force') });
