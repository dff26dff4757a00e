// Per-context state lives on the context the composition root builds (src/context.ts), never in a module-level
// registry keyed by the context (issue 43): two contexts in one process keep separate state, each by its own config.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppContext } from '../../src/app/context.ts';
import { closeContext } from '../../src/context.ts';
import { compileOnSave } from '../../src/connectivity/user-code.ts';
import { sandboxFromConfig } from '../../src/sandbox/runner.ts';
import { testContext } from '../helpers.ts';
import { reportLateArgs } from '../sandbox/fixtures.ts';

const SRC = path.resolve(import.meta.dirname, '../../src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );
}

describe('per-context state', () => {
  it('has no registry keyed by the context in src/ (a WeakMap or Map of AppContext, or a mutable limits global)', () => {
    const found: string[] = [];
    for (const file of sources(SRC)) {
      const text = readFileSync(file, 'utf8');
      for (const [i, line] of text.split('\n').entries()) {
        if (/\b(Weak)?Map<\s*(AppContext|AppStores|Pick<AppContext)\b/.test(line) || /\bconfigureSupplierCodeLimits\b/.test(line)) {
          found.push(`${path.relative(SRC, file)}:${i + 1}: ${line.trim()}`);
        }
      }
    }
    expect(found).toEqual([]);
  });

  describe('two contexts in one process', () => {
    let small: AppContext;
    let plain: AppContext;
    beforeAll(async () => {
      small = await testContext({ FIRMWARE_CACHE_BYTES: '0', SANDBOX_MAX_SOURCE_CHARS: '100', SANDBOX_MAX_LOG_LINES: '3' });
      plain = await testContext();
    });
    afterAll(async () => {
      await Promise.all([small, plain].filter(Boolean).map((c) => closeContext(c)));
    });

    it('hold each of their fields apart', () => {
      const stores = new Set(['config', 'log', 'db', 'redis', 'keys', 'changes']);
      const fields = Object.keys(small).filter((k) => !stores.has(k));
      expect(fields.sort()).toEqual(
        Object.keys(plain)
          .filter((k) => !stores.has(k))
          .sort(),
      );
      expect(fields.sort()).toEqual([
        'certificateIdentity',
        'counters',
        'dryRuns',
        'exports',
        'firmware',
        'localHandoff',
        'mail',
        'supplierAlerts',
        'thresholds',
        'trust',
      ]);
      for (const k of fields) expect(small[k as keyof AppContext], k).not.toBe(plain[k as keyof AppContext]);
    });

    it('size their firmware caches by their own configuration', () => {
      expect(small.firmware.bytes.fits(1000)).toBe(false);
      expect(plain.firmware.bytes.fits(1000)).toBe(true);
    });

    it('bound supplier code by their own configuration', async () => {
      const source = `function handle() { return "${'x'.repeat(150)}"; }`;
      await expect(compileOnSave(small.config.supplierCode, 'eventHandler', source, 'two-contexts')).rejects.toMatchObject({
        key: 'parameter_error',
        message: expect.stringMatching(/^eventHandler: .*over the limit of 100 \(SANDBOX_MAX_SOURCE_CHARS\)/),
      });
      expect(await compileOnSave(plain.config.supplierCode, 'eventHandler', source, 'two-contexts')).toMatch(/^[0-9a-f]{64}$/);
      const [a, b] = [sandboxFromConfig(small.config, small.log), sandboxFromConfig(plain.config, plain.log)];
      try {
        const code = 'function handle(a: Arguments, exec: Exec) { for (let i = 0; i < 10; i++) exec.addLog("line " + i); }';
        const logs = async (s: typeof a) => (await s.runEventHandler({ isolationKey: 'two-contexts', source: code, args: reportLateArgs() })).logs.length;
        expect(await logs(a)).toBe(3);
        expect(await logs(b)).toBe(10);
      } finally {
        a.dispose();
        b.dispose();
      }
    });
  });
});
