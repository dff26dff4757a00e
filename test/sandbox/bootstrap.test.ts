import { readFileSync } from 'node:fs';
import ivm from 'isolated-vm';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { RUNTIME_FILENAME, runtimeSource } from '../../src/sandbox/runtime.ts';

const BOOTSTRAP = new URL('../../src/sandbox/isolate/bootstrap.ts', import.meta.url);
const isolates: ivm.Isolate[] = [];
afterAll(() => {
  for (const iso of isolates) iso.dispose();
});

/** The runtime compiled in a fresh isolate, as the host does; its completion value's three functions. */
async function runtimeIn(source: string) {
  const iso = new ivm.Isolate({ memoryLimit: 32 });
  isolates.push(iso);
  const context = await iso.createContext();
  const script = await iso.compileScript(source, { filename: RUNTIME_FILENAME });
  const api = (await script.run(context, { reference: true })) as ivm.Reference;
  const fn = async (name: string) => (await api.get(name, { reference: true })) as ivm.Reference;
  const [run, runBatch, collect] = [await fn('run'), await fn('runBatch'), await fn('collect')];
  const supplier = async (code: string) => (await iso.compileScript(code)).run(context);
  return { iso, context, run, runBatch, collect, supplier, typeOf: (name: string) => context.eval(`typeof ${name}`) };
}

describe('the in-sandbox runtime as a TypeScript file (src/sandbox/isolate/bootstrap.ts)', () => {
  it('type-checks strictly with only what an isolate has: the ECMAScript library, no Node.js or DOM types', () => {
    const program = ts.createProgram([BOOTSTRAP.pathname], {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2024.d.ts'],
      types: [],
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      erasableSyntaxOnly: true,
      verbatimModuleSyntax: true,
    });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(diagnostics).toEqual([]);
    // and it imports nothing at run time: a script has no imports, and the runtime has no scope around it to capture
    const source = readFileSync(BOOTSTRAP, 'utf8');
    expect(source).not.toMatch(/^import (?!type )/m);
    expect(source).not.toMatch(/^export (?!(interface|type) )/m);
  });

  it('is one script whose value is the runtime, the limits given by the host, and it leaves nothing on the global object', async () => {
    const source = runtimeSource({ maxLogLines: 2, maxLogChars: 5, maxCalls: 1, maxCallBytes: 100, maxResultBytes: 1000 });
    const rt = await runtimeIn(source);
    expect(await Promise.all(['bootstrap', 'run', 'runBatch', 'collect', 'limits', 'MAX_LOG_LINES'].map(rt.typeOf))).toEqual(Array(6).fill('undefined'));
    await rt.supplier(`function handle(args, exec) {
      exec.addLog('one'); exec.addLog('a long line'); exec.addLog('three');
      exec.markCommandAsSent('c1');
      try { exec.markCommandAsSent('c2'); } catch (e) { exec.addLog(e.name); }
      return { hex: exec.uInt8ArrayToHex(exec.base64ToUInt8Array('AQL/')), x: args.x };
    }`);
    const out = JSON.parse((await rt.run.apply(undefined, ['handler', 1, JSON.stringify({ x: 7 })])) as string);
    expect(out).toEqual({
      ok: true,
      result: { hex: '0102ff', x: 7 },
      calls: [{ name: 'markCommandAsSent', args: { commandHashId: 'c1' } }],
      logs: ['one', 'a lon\u2026 [truncated]'],
      errors: [
        'refused markCommandAsSent: too many exec calls in one run (limit 1, SANDBOX_MAX_CALLS)',
        '2 more log lines dropped: at most 2 per run (SANDBOX_MAX_LOG_LINES)',
        '1 log line cut at 5 characters, marked [truncated] (SANDBOX_MAX_LOG_LINE_CHARS)',
      ],
    });
  });

  it("keeps the runtime out of the supplier's stacks and holds the genuine builtins when the supplier replaces them", async () => {
    const rt = await runtimeIn(runtimeSource());
    await rt.supplier(`JSON.stringify = () => 'forged'; function handle(args, exec) { exec.parseReport({ reportTypeHashId: 'r', payload: 1 }); }`);
    const out = JSON.parse((await rt.run.apply(undefined, ['handler', 2, '{}'])) as string);
    expect(out.ok).toBe(false);
    expect(out.error).toMatchObject({ name: 'TypeError', message: 'parseReport: payload must be a string, got number' });
    expect(out.error.stack).toContain('at handle');
    expect(out.error.stack).not.toContain(RUNTIME_FILENAME);
    const batch = ((await rt.runBatch.apply(undefined, ['parser', 3, '{}\n{}', 1000])) as string).split('\n');
    expect(batch).toHaveLength(1); // stops after a failed run
    expect(JSON.parse((await rt.collect.apply(undefined, [99])) as string)).toEqual({ calls: [], logs: [], errors: [] });
  });
});
