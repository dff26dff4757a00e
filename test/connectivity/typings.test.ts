import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers.ts';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const README = readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '../../docs/walkthrough.md'), 'utf8');

const PATHS = {
  eventHandler: '/device-type/typings.d.ts',
  parser: '/supplier-report-type/typings.d.ts',
  webhookIdentifier: '/supplier-webhook/typings.d.ts',
  certificateIdentifier: '/supplier-certificate/typings.d.ts',
} as const;
type Kind = keyof typeof PATHS;

async function typings(kind: Kind): Promise<string> {
  // no Api-Version, no token: what an editor's plain download sends
  const r = await api.app.inject({ method: 'GET', url: PATHS[kind] });
  expect(r.statusCode).toBe(200);
  expect(r.headers['content-type']).toContain('application/typescript');
  return r.body;
}

const libraries = new Map<string, ts.SourceFile | undefined>();

/** The compiler's complaints about `source` checked strictly against the kind's typings, as an editor would show them. */
async function check(kind: Kind, source: string): Promise<string[]> {
  const files = new Map([
    ['/typings.d.ts', await typings(kind)],
    ['/handler.ts', source],
  ]);
  // the sandbox has the language (Date, JSON, Math, typed arrays), no DOM and no Node.js
  const options: ts.CompilerOptions = { strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, lib: ['lib.es2022.d.ts'], types: [] };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (name, version, ...rest) => {
    if (files.has(name)) return ts.createSourceFile(name, files.get(name)!, version);
    // the standard library is parsed once for the whole file, not once per check
    if (!libraries.has(name)) libraries.set(name, getSourceFile(name, version, ...rest));
    return libraries.get(name);
  };
  host.fileExists = (name) => files.has(name) || fileExists(name);
  host.readFile = (name) => files.get(name) ?? readFile(name);
  const program = ts.createProgram(['/typings.d.ts', '/handler.ts'], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}

/** The walkthrough's example code (docs/walkthrough.md) of the curl walk-through: a shell variable holding `function handle ...`. */
function readmeVariable(name: string): string {
  const match = new RegExp(`^${name}="(function handle[\\s\\S]*?\\n\\})"$`, 'm').exec(README);
  if (!match) throw new Error(`docs/walkthrough.md has no ${name}="function handle ..." example`);
  // the shell substitutes hashIds ('$Q', '$RT', '$DT') before the code is saved
  return match[1].replace(/\$[A-Z]+/g, 'abc123');
}

describe('typings for supplier code', () => {
  it.each([
    ['eventHandler', 'HANDLER'],
    ['parser', 'PARSER'],
    ['webhookIdentifier', 'IDENT'],
    ['certificateIdentifier', 'IDENTIFIER'],
  ] as const)("the walkthrough's %s example (%s) compiles against its typings without a complaint", async (kind, variable) => {
    expect(await check(kind, readmeVariable(variable))).toEqual([]);
  });

  it("the walkthrough's complete event handler, with overloads per event, compiles against the event handler typings", async () => {
    const block = /## Typings for supplier code[\s\S]*?```ts\n([\s\S]*?)```/.exec(README);
    expect(block).not.toBeNull();
    expect(await check('eventHandler', block![1])).toEqual([]);
  });

  it.each([
    [
      'eventHandler',
      'the request of an event that may have none',
      'function handle(args: Arguments, exec: Exec) { exec.addLog(args.event.webRequest.ip); }',
      'webRequest',
    ],
    [
      'eventHandler',
      'a misspelt member of a parseReport call',
      'function handle(args: Arguments, exec: Exec) { exec.parseReport({ reportTypeHashID: "r", payload: "" }); }',
      'reportTypeHashID',
    ],
    ['eventHandler', 'a date where a Date goes', 'function handle(args: Arguments, exec: Exec) { exec.expectNextReportBefore("tomorrow"); }', 'string'],
    [
      'eventHandler',
      'an answer without its status',
      'function handle(args: ArgumentsForIncomingRequestEvent, exec: Exec): IncomingRequestResponse { return { body: "ok" }; }',
      'statusCode',
    ],
    ['parser', 'a parser result without generatedAt', 'function handle(args: Arguments, exec: Exec): Result { return { measurements: [] }; }', 'generatedAt'],
    [
      'parser',
      "an event handler's exec call in a parser",
      'function handle(args: Arguments, exec: Exec) { exec.markCommandAsSent("c"); }',
      'markCommandAsSent',
    ],
    [
      'webhookIdentifier',
      'a body that may be absent',
      'function handle(args: Arguments): Result { return { deviceTypeHashId: "d", deviceIdentifier: String(args.request.body.data) }; }',
      'undefined',
    ],
    [
      'certificateIdentifier',
      'a certificate identifier reading a request',
      'function handle(args: Arguments): Result { return { deviceTypeHashId: "d", deviceIdentifier: args.request.ip }; }',
      'request',
    ],
  ] as const)('%s: %s is an error', async (kind, _what, source, named) => {
    const complaints = await check(kind, source);
    expect(complaints.length).toBeGreaterThan(0);
    expect(complaints.join('\n')).toContain(named);
    expect(complaints.every((c) => c.startsWith('/handler.ts'))).toBe(true);
  });

  it('lists the four typings in the OpenAPI document', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, { get?: { summary?: string } }> };
    for (const p of Object.values(PATHS)) expect(doc.paths[p]?.get?.summary, p).toMatch(/^typings of /);
  });
});
