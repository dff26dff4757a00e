import { describe, expect, it } from 'vitest';
import { compilerStats, compileUserCode, mapStackToSource } from '../../src/sandbox/compile.ts';
import { DEFAULT_SUPPLIER_CODE_LIMITS } from '../../src/sandbox/limits.ts';
import { CONTRACT_EXAMPLE } from './fixtures.ts';

describe('compileUserCode', async () => {
  it('compiles the UDF-CONTRACT example (overloads, interface, type alias, top-level const)', async () => {
    const r = await compileUserCode(CONTRACT_EXAMPLE);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(r.js).not.toMatch(/interface|: Exec|IncomingRequestResponse;/);
    expect(r.js).toContain('function handle(args, exec)');
    // cached: the same object comes back
    expect(await compileUserCode(CONTRACT_EXAMPLE)).toBe(r);
  });

  it('compiles non-erasable TypeScript too (enum)', async () => {
    const r = await compileUserCode('enum Unit { C, F }\nfunction handle(a: number): Unit { return Unit.F; }');
    expect(r.ok).toBe(true);
  });

  it('reports a TypeScript syntax error with 1-based line and column', async () => {
    const r = await compileUserCode('const a = 1;\nfunction handle() {\n  const b = a +;\n}\n');
    expect(r).toMatchObject({ ok: false, line: 3, column: 16 });
    if (!r.ok) expect(r.message).toMatch(/syntax error/i);
  });

  it('reports a JavaScript early error at its position in the TypeScript source', async () => {
    // transform mode reformats the code: the position must be mapped back
    const r = await compileUserCode('interface X {\n  a: number\n}\nconst a: X = { a: 1 };\nfunction handle() {}\n    let a = 2;\n');
    expect(r).toMatchObject({ ok: false, line: 6, column: 9 });
    if (!r.ok) expect(r.message).toMatch(/already been declared/);
  });

  it('refuses code without a top-level handle', async () => {
    for (const src of ['function other() { return 1; }', 'function outer() { function handle() {} }', '']) {
      const r = await compileUserCode(src);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.message).toMatch(/top-level function handle/);
    }
  });

  it('maps runtime stack positions back to the TypeScript source', async () => {
    const src = 'type T = {\n  a: number\n};\n\nfunction handle(): T {\n  throw new Error("x");\n}\n';
    const r = await compileUserCode(src);
    if (!r.ok) throw new Error(r.message);
    const line = r.js.split('\n').findIndex((l) => l.includes('throw')) + 1;
    const col = r.js.split('\n')[line - 1].indexOf('throw') + 1;
    expect(mapStackToSource(r.hash, `Error: x\n    at handle (udf.js:${line}:${col})`)).toBe('Error: x\n    at handle (udf.ts:6:3)');
  });
});

// about 1,100 nested parentheses overflow the type stripper's WebAssembly stack: in the process's own
// stripper this broke every later compile ("memory access out of bounds") until a restart
const POISON = `const a = ${'('.repeat(3000)}1${')'.repeat(3000)};\nfunction handle() { return a; }\n`;

describe('compiling hostile code', () => {
  it('a source that faults the type stripper fails for its author only; later compiles of anyone work', async () => {
    const faults = compilerStats.faults;
    const [poisoned, other] = await Promise.all([
      compileUserCode(POISON, { owner: 'attacker', save: true }),
      compileUserCode('const x: number = 1;\nfunction handle() { return x; }\n', { owner: 'victim', save: true }),
    ]);
    expect(poisoned.ok).toBe(false);
    if (!poisoned.ok) expect(poisoned.message).toMatch(/TypeScript compiler failed on this code/);
    expect(other.ok).toBe(true);
    expect(compilerStats.faults).toBeGreaterThan(faults);
    const after = await compileUserCode('interface P { v: number }\nfunction handle(a: P) { return a.v; }\n', { owner: 'victim', save: true });
    expect(after.ok).toBe(true);
  });

  it("one owner's many compiles do not hold back another's: owners take turns", async () => {
    const done: string[] = [];
    const track = (label: string, p: Promise<unknown>) =>
      p.then(() => {
        done.push(label);
      });
    const a = Array.from({ length: 30 }, (_, i) =>
      track(`a${i}`, compileUserCode(`function handle(): number { return ${i}; } // turns a ${i}`, { owner: 'turns-a' })),
    );
    const b = track('b', compileUserCode('function handle(): string { return "b"; } // turns b', { owner: 'turns-b' }));
    await Promise.all([...a, b]);
    expect(done.indexOf('b')).toBeLessThan(3);
  });

  it('many distinct sources in a burst all compile', async () => {
    const limits = { ...DEFAULT_SUPPLIER_CODE_LIMITS, compilesPerMinute: 10_000 };
    const results = await Promise.all(
      Array.from({ length: 600 }, (_, i) =>
        compileUserCode(`const v${i}: number = ${i};\nfunction handle(): number { return v${i}; }\n`, { owner: 'burst', save: true, limits }),
      ),
    );
    expect(results.filter((r) => !r.ok)).toEqual([]);
  });

  it('limits the source size and the new sources per minute of one owner, not of another', async () => {
    // the caller's limits (its context's config.supplierCode), not the process's
    const limits = { ...DEFAULT_SUPPLIER_CODE_LIMITS, maxSourceChars: 200, compilesPerMinute: 3 };
    const big = await compileUserCode(`function handle() { return "${'x'.repeat(300)}"; }`, { owner: 'a', save: true, limits });
    expect(big).toMatchObject({ ok: false });
    if (!big.ok) expect(big.message).toMatch(/over the limit of 200 \(SANDBOX_MAX_SOURCE_CHARS\)/);
    const fresh = (owner: string, i: number) =>
      compileUserCode(`function handle() { return ${i}; } // ${owner} ${Math.random()}`, { owner, save: true, limits });
    for (let i = 0; i < 3; i++) expect((await fresh('rate-a', i)).ok).toBe(true);
    await expect(fresh('rate-a', 4)).rejects.toThrow(/SANDBOX_COMPILES_PER_MINUTE/);
    expect((await fresh('rate-b', 1)).ok).toBe(true);
    // another caller with the default limits, in the same process, is held to its own bounds
    expect((await compileUserCode(`function handle() { return "${'x'.repeat(300)}"; }`, { owner: 'a', save: true })).ok).toBe(true);
  });
});
