/**
 * test/global-setup.ts once per run: vitest runs the global setup of every project (the root, unit, system) in the
 * one main process, and a second run of it would make the test database again. Marked on globalThis, not in the
 * environment: a vitest run a test starts (test/fleet/redis-cluster.test.ts) makes a database of its own.
 */
import setup from '../global-setup.ts';

const DONE = Symbol.for('gridgate.testGlobalSetup');

export default async function setupOnce(): Promise<(() => Promise<void>) | undefined> {
  const marks = globalThis as Record<symbol, boolean | undefined>;
  if (marks[DONE]) return undefined;
  marks[DONE] = true;
  return setup();
}
