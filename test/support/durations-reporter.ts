/**
 * A vitest reporter that writes how long each test file took to `test-results/durations.json` (or
 * TEST_DURATIONS_FILE) at the end of every run: the file, its project (unit or system), its state, and its time
 * split as vitest measures it (import and setup, then its tests and hooks). `.ci/run` prints the slowest.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

export interface FileDuration {
  file: string;
  project: string;
  state: string;
  /** everything vitest spent on the file: environment, preparation, import, setup files, tests and hooks */
  totalMs: number;
  /** its tests and hooks (beforeAll, afterAll, ...) */
  testsMs: number;
  /** importing the file and what it imports */
  importMs: number;
}

export default class DurationsReporter implements Reporter {
  readonly #file: string;

  constructor(opts: { outputFile?: string } = {}) {
    this.#file = path.resolve(opts.outputFile ?? 'test-results/durations.json');
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const files: FileDuration[] = modules
      .map((m) => {
        const d = m.diagnostic();
        const totalMs = d.environmentSetupDuration + d.prepareDuration + d.collectDuration + d.setupDuration + d.duration;
        return {
          file: path.relative(process.cwd(), m.moduleId),
          project: m.project.name,
          state: m.state(),
          totalMs: Math.round(totalMs),
          testsMs: Math.round(d.duration),
          importMs: Math.round(d.collectDuration),
        };
      })
      .sort((a, b) => b.totalMs - a.totalMs);
    mkdirSync(path.dirname(this.#file), { recursive: true });
    writeFileSync(this.#file, `${JSON.stringify({ writtenAt: new Date().toISOString(), files }, null, 1)}\n`);
  }
}
