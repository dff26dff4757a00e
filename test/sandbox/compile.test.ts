import { describe, expect, it } from 'vitest';
import { compileUserCode, mapStackToSource } from '../../src/sandbox/compile.ts';
import { CONTRACT_EXAMPLE } from './fixtures.ts';

describe('compileUserCode', () => {
  it('compiles the UDF-CONTRACT example (overloads, interface, type alias, top-level const)', () => {
    const r = compileUserCode(CONTRACT_EXAMPLE);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(r.js).not.toMatch(/interface|: Exec|IncomingRequestResponse;/);
    expect(r.js).toContain('function handle(args, exec)');
    // cached: the same object comes back
    expect(compileUserCode(CONTRACT_EXAMPLE)).toBe(r);
  });

  it('compiles non-erasable TypeScript too (enum)', () => {
    const r = compileUserCode('enum Unit { C, F }\nfunction handle(a: number): Unit { return Unit.F; }');
    expect(r.ok).toBe(true);
  });

  it('reports a TypeScript syntax error with 1-based line and column', () => {
    const r = compileUserCode('const a = 1;\nfunction handle() {\n  const b = a +;\n}\n');
    expect(r).toMatchObject({ ok: false, line: 3, column: 16 });
    if (!r.ok) expect(r.message).toMatch(/syntax error/i);
  });

  it('reports a JavaScript early error at its position in the TypeScript source', () => {
    // transform mode reformats the code: the position must be mapped back
    const r = compileUserCode('interface X {\n  a: number\n}\nconst a: X = { a: 1 };\nfunction handle() {}\n    let a = 2;\n');
    expect(r).toMatchObject({ ok: false, line: 6, column: 9 });
    if (!r.ok) expect(r.message).toMatch(/already been declared/);
  });

  it('refuses code without a top-level handle', () => {
    for (const src of ['function other() { return 1; }', 'function outer() { function handle() {} }', '']) {
      const r = compileUserCode(src);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.message).toMatch(/top-level function handle/);
    }
  });

  it('maps runtime stack positions back to the TypeScript source', () => {
    const src = 'type T = {\n  a: number\n};\n\nfunction handle(): T {\n  throw new Error("x");\n}\n';
    const r = compileUserCode(src);
    if (!r.ok) throw new Error(r.message);
    const line = r.js.split('\n').findIndex((l) => l.includes('throw')) + 1;
    const col = r.js.split('\n')[line - 1].indexOf('throw') + 1;
    expect(mapStackToSource(r.hash, `Error: x\n    at handle (udf.js:${line}:${col})`)).toBe('Error: x\n    at handle (udf.ts:6:3)');
  });
});
