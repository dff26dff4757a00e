import { afterAll, describe, expect, it } from 'vitest';
import { forgetSourceMaps } from '../../src/sandbox/compile.ts';
import { Sandbox } from '../../src/sandbox/runner.ts';
import { CONTRACT_EXAMPLE, GOOD_HANDLER, LAST_ONLINE, device, reportLateArgs, requestArgs } from './fixtures.ts';

const TIMEOUT = 300;
const sandbox = new Sandbox({ timeoutMs: TIMEOUT, memoryLimitMb: 32 });
// memory runs get a generous time limit so that, on a loaded machine, the memory limit is hit first
const memSandbox = new Sandbox({ timeoutMs: 10_000, memoryLimitMb: 32 });
afterAll(() => {
  sandbox.dispose();
  memSandbox.dispose();
});

const good = (isolationKey: string) => sandbox.runEventHandler({ isolationKey, source: GOOD_HANDLER, args: requestArgs() });

describe('event handler runs', () => {
  it('runs the UDF-CONTRACT example: result, calls, logs', async () => {
    const run = await sandbox.runEventHandler({ isolationKey: 'env-a', source: CONTRACT_EXAMPLE, args: requestArgs() });
    expect(run).toMatchObject({
      ok: true,
      result: { statusCode: 200, headers: {}, body: { type: 'json', data: { commands: [{ id: 'cmd1', fields: { level: 3 } }] } } },
      calls: [
        { name: 'parseReport', args: { reportTypeHashId: 'r1a2b3', payload: JSON.stringify({ type: 'json', data: { t: 21.5 } }), generatedAt: null } },
        { name: 'markCommandAsSent', args: { commandHashId: 'cmd1' } },
      ],
      logs: ['got POST /'],
    });
    expect(run.durationMs).toBeGreaterThan(0);

    const bad = await sandbox.runEventHandler({ isolationKey: 'env-a', source: CONTRACT_EXAMPLE, args: requestArgs(null) });
    expect(bad).toMatchObject({ ok: true, result: { statusCode: 400, body: { type: 'json', data: ['parameter_error', 'POST a body'] } }, calls: [] });

    // other events: return value ignored
    const late = await sandbox.runEventHandler({ isolationKey: 'env-a', source: CONTRACT_EXAMPLE, args: reportLateArgs() });
    expect(late).toMatchObject({ ok: true, result: null, calls: [], logs: [] });
  });

  it('revives dates inside the sandbox (device and commands, not device fields)', async () => {
    const source = `function handle(args: Arguments, exec: Exec) {
      const c = args.scheduledCommands[0].command;
      return { statusCode: 200, body: {
        lastOnline: args.device.lastOnlineAt instanceof Date,
        lastOnlineMs: args.device.lastOnlineAt.getTime(),
        next: args.device.nextReportBefore instanceof Date,
        createdAt: c.createdAt instanceof Date,
        startAt: c.startAt,
        field: typeof args.device.fields.createdAt,
      } };
    }`;
    const run = await sandbox.runEventHandler({ isolationKey: 'env-a', source, args: requestArgs() });
    expect(run).toMatchObject({
      ok: true,
      result: { body: { data: { lastOnline: true, lastOnlineMs: Date.parse(LAST_ONLINE), next: true, createdAt: true, startAt: null, field: 'string' } } },
    });
  });

  it('records every exec call as plain data, dates as ISO strings', async () => {
    const source = `function handle(args: Arguments, exec: Exec) {
      const at = new Date("2024-06-01T00:00:00Z");
      exec.parseReport({ reportTypeHashId: "rt", payload: "00ff", generatedAt: at });
      exec.markCommandAsSent("c1");
      exec.dropCommand("c2", { markAsDeleted: true });
      exec.dropCommand("c3");
      const fields = { level: 5 };
      exec.scheduleCommand({ commandTypeHashId: "ct", fields, startAt: at, channelIndices: [0, 2] });
      fields.level = 6; // recorded at call time
      exec.setDeviceFields({ battery: 3.3, seenAt: at });
      exec.increaseReportingCounter();
      exec.increaseReportingCounter(at);
      exec.expectNextReportBefore(null);
      exec.expectNextReportBefore(at);
      exec.sendRequest({ url: "https://x.example/a", method: "post", headers: { a: "b" }, body: { x: 1 } });
      exec.sendRequest({ url: "https://x.example/b", method: "PUT", body: exec.hexToUInt8Array("0aff") });
      exec.offerFirmware("fw1");
      exec.addLog(exec.uInt8ArrayToBase64(exec.base64ToUInt8Array("aGVsbG8=")), exec.uInt8ArrayToHex(new Uint8Array([1, 171])));
    }`;
    const run = await sandbox.runEventHandler({ isolationKey: 'env-a', source, args: reportLateArgs() });
    const at = '2024-06-01T00:00:00.000Z';
    expect(run).toEqual({
      ok: true,
      result: null,
      durationMs: expect.any(Number),
      logs: ['aGVsbG8= 01ab'],
      errors: [],
      calls: [
        { name: 'parseReport', args: { reportTypeHashId: 'rt', payload: '00ff', generatedAt: at } },
        { name: 'markCommandAsSent', args: { commandHashId: 'c1' } },
        { name: 'dropCommand', args: { commandHashId: 'c2', markAsDeleted: true } },
        { name: 'dropCommand', args: { commandHashId: 'c3', markAsDeleted: false } },
        { name: 'scheduleCommand', args: { commandTypeHashId: 'ct', fields: { level: 5 }, startAt: at, endAt: null, channelIndices: [0, 2] } },
        { name: 'setDeviceFields', args: { fields: { battery: 3.3, seenAt: at } } },
        { name: 'increaseReportingCounter', args: { at: null } },
        { name: 'increaseReportingCounter', args: { at } },
        { name: 'expectNextReportBefore', args: { before: null } },
        { name: 'expectNextReportBefore', args: { before: at } },
        { name: 'sendRequest', args: { url: 'https://x.example/a', method: 'POST', headers: { a: 'b' }, body: { type: 'json', data: { x: 1 } } } },
        { name: 'sendRequest', args: { url: 'https://x.example/b', method: 'PUT', headers: {}, body: { type: 'hex', data: '0aff' } } },
        { name: 'offerFirmware', args: { firmwareHashId: 'fw1' } },
      ],
    });
  });

  it('validates exec arguments at the call site, visible in the supplier stack', async () => {
    const source =
      'function handle(args: Arguments, exec: Exec) {\n  exec.addLog("before");\n  exec.markCommandAsSent("c1");\n  exec.parseReport({ payload: "x" });\n}\n';
    const run = await sandbox.runEventHandler({ isolationKey: 'env-a', source, args: reportLateArgs() });
    expect(run.ok).toBe(false);
    if (run.ok) return;
    expect(run.error.kind).toBe('error');
    expect(run.error.message).toBe('TypeError: parseReport: reportTypeHashId must be a non-empty string, got undefined');
    expect(run.error.stack).toContain('at handle (udf.ts:4:8)');
    expect(run.error.stack).not.toContain('gridgate-runtime');
    expect(run.logs).toEqual(['before']);
    expect(run.calls).toEqual([{ name: 'markCommandAsSent', args: { commandHashId: 'c1' } }]);
  });

  it('caps log lines and their length', async () => {
    const source = 'function handle(a: Arguments, exec: Exec) { for (let i = 0; i < 300; i++) exec.addLog("x".repeat(i === 0 ? 5000 : 1)); }';
    const run = await sandbox.runEventHandler({ isolationKey: 'env-a', source, args: reportLateArgs() });
    expect(run.logs).toHaveLength(200);
    expect(run.logs[0].length).toBeLessThan(2100);
    expect(run.logs[0]).toMatch(/\[truncated\]$/);
    expect(run.errors).toEqual([
      '100 more log lines dropped: at most 200 per run (SANDBOX_MAX_LOG_LINES)',
      '1 log line cut at 2000 characters, marked [truncated] (SANDBOX_MAX_LOG_LINE_CHARS)',
    ]);
  });

  it('refuses an exec call whose arguments are over SANDBOX_MAX_CALL_BYTES, also when the code catches the refusal', async () => {
    const small = new Sandbox({ timeoutMs: TIMEOUT, memoryLimitMb: 32, runtimeLimits: { maxCallBytes: 1000 } });
    try {
      const source = `function handle(a: Arguments, exec: Exec) {
        exec.setDeviceFields({ ok: 'x'.repeat(900) });
        try { exec.parseReport({ reportTypeHashId: 'rt', payload: 'é'.repeat(600) }); } catch (e) { exec.addLog('caught ' + (e as Error).message); }
        exec.parseReport({ reportTypeHashId: 'rt', payload: 'y'.repeat(5000) });
      }`;
      const run = await small.runEventHandler({ isolationKey: 'env-calls', source, args: reportLateArgs() });
      expect(run).toMatchObject({
        ok: false,
        error: { kind: 'error', message: 'RangeError: parseReport: the arguments are 5057 bytes of JSON, over the limit of 1000 (SANDBOX_MAX_CALL_BYTES)' },
      });
      expect(run.calls.map((c) => c.name)).toEqual(['setDeviceFields']);
      // 600 two-byte characters: counted in UTF-8 bytes, not characters
      expect(run.logs).toEqual(['caught parseReport: the arguments are 1257 bytes of JSON, over the limit of 1000 (SANDBOX_MAX_CALL_BYTES)']);
      expect(run.errors).toEqual([
        'refused parseReport: the arguments are 1257 bytes of JSON, over the limit of 1000 (SANDBOX_MAX_CALL_BYTES)',
        'refused parseReport: the arguments are 5057 bytes of JSON, over the limit of 1000 (SANDBOX_MAX_CALL_BYTES)',
      ]);
    } finally {
      small.dispose();
    }
  });

  it('fails a run whose answer body is over SANDBOX_MAX_ANSWER_BYTES, or whose result is over SANDBOX_MAX_RESULT_BYTES', async () => {
    const small = new Sandbox({ timeoutMs: 5000, memoryLimitMb: 64, maxAnswerBytes: 1000, runtimeLimits: { maxResultBytes: 100_000 } });
    try {
      const answer = (body: string) =>
        small.runEventHandler({
          isolationKey: 'env-answer',
          source: `function handle(a: Arguments, exec: Exec) { return { statusCode: 200, body: ${body} }; }`,
          args: requestArgs(),
        });
      expect(await answer('{ type: "string", data: "x".repeat(1000) }')).toMatchObject({
        ok: true,
        result: { body: { type: 'string', data: 'x'.repeat(1000) } },
      });
      // a plain string is a JSON body: its quotes are sent too
      expect(await answer('"x".repeat(999)')).toMatchObject({
        ok: false,
        error: { kind: 'invalid-result', message: "the answer's body is 1001 bytes, over the limit of 1000 (SANDBOX_MAX_ANSWER_BYTES)" },
      });
      expect(await answer('{ type: "hex", data: "ab".repeat(1001) }')).toMatchObject({
        ok: false,
        error: { kind: 'invalid-result', message: "the answer's body is 1001 bytes, over the limit of 1000 (SANDBOX_MAX_ANSWER_BYTES)" },
      });
      const huge = await answer('"x".repeat(30 * 1024 * 1024)');
      expect(huge).toMatchObject({ ok: false, error: { kind: 'invalid-result' } });
      if (!huge.ok)
        expect(huge.error.message).toMatch(
          /^RangeError: the value returned by handle is \d+ bytes of JSON, over the limit of 100000 \(SANDBOX_MAX_RESULT_BYTES\)$/,
        );
    } finally {
      small.dispose();
    }
  });

  it('refuses answer headers a device answer cannot carry (CR/LF, no token, framing) and keeps the rest', async () => {
    const source = `function handle(a: Arguments, exec: Exec) {
      return { statusCode: 200, headers: { 'x-ok': 'fine', 'x-split': 'a\\r\\nSet-Cookie: evil=1', 'bad name': 'v', 'Content-Length': '5' }, body: { type: 'string', data: 'hello' } };
    }`;
    const run = await sandbox.runEventHandler({ isolationKey: 'env-a', source, args: requestArgs() });
    expect(run).toMatchObject({ ok: true, result: { statusCode: 200, headers: { 'x-ok': 'fine' }, body: { type: 'string', data: 'hello' } } });
    if (run.ok) expect(Object.keys(run.result!.headers)).toEqual(['x-ok']);
    expect(run.errors).toHaveLength(3);
    expect(run.errors[0]).toMatch(/^header "x-split" refused: its value .* holds CR, LF/);
    expect(run.errors[1]).toMatch(/^header "bad name" refused: a header name is a token/);
    expect(run.errors[2]).toMatch(/^header "Content-Length" refused: the gateway sets it/);
  });

  it('rejects invalid handler results as invalid-result', async () => {
    for (const ret of [
      '{ statusCode: 42 }',
      '{ statusCode: 200, headers: { a: 1 } }',
      'Promise.resolve({ statusCode: 200 })',
      '{ statusCode: 200, body: 10n }',
    ]) {
      const run = await sandbox.runEventHandler({
        isolationKey: 'env-a',
        source: `function handle(a: Arguments, exec: Exec) { exec.addLog("l"); return ${ret}; }`,
        args: requestArgs(),
      });
      expect(run).toMatchObject({ ok: false, error: { kind: 'invalid-result' }, logs: ['l'] });
    }
  });

  it('reports a compile error as kind compile', async () => {
    const run = await sandbox.runEventHandler({ isolationKey: 'env-a', source: 'function handle( {', args: reportLateArgs() });
    expect(run).toMatchObject({ ok: false, error: { kind: 'compile', line: 1 } });
  });
});

describe('report parser runs', () => {
  const parser = (significand: string, orderOfMagnitude = '-3') => `
    function toNumber(bytes: Uint8Array): number { return (bytes[0] << 8) | bytes[1]; }
    function handle(args: { payload: string; device: unknown }, exec: Exec) {
      const bytes = exec.hexToUInt8Array(args.payload);
      exec.addLog("raw " + toNumber(bytes));
      return {
        generatedAt: new Date("2024-05-01T12:00:00Z"),
        measurements: [
          { channelIndex: 0, quantityHashId: "q1", orderOfMagnitude: 0, significand: toNumber(bytes) },
          { channelIndex: 1, quantityHashId: "q2", orderOfMagnitude: ${orderOfMagnitude}, significand: ${significand}, generatedAt: new Date(1714561200000) },
        ],
        fields: { battery: 3 },
      };
    }`;

  it('rounds 3.06 * 1000 to 3060', async () => {
    const run = await sandbox.runReportParser({ isolationKey: 'env-a', source: parser('3.06 * 1000'), args: { payload: '0102', device: device() } });
    expect(run).toEqual({
      ok: true,
      calls: [],
      logs: ['raw 258'],
      errors: [],
      durationMs: expect.any(Number),
      result: {
        generatedAt: '2024-05-01T12:00:00.000Z',
        measurements: [
          { channelIndex: 0, quantityHashId: 'q1', orderOfMagnitude: 0, significand: 258, generatedAt: '2024-05-01T12:00:00.000Z' },
          { channelIndex: 1, quantityHashId: 'q2', orderOfMagnitude: -3, significand: 3060, generatedAt: '2024-05-01T11:00:00.000Z' },
        ],
        fields: { battery: 3 },
      },
    });
  });

  it('fails 3.5, NaN and orderOfMagnitude 200 naming the measurement', async () => {
    const cases: [string, string, string][] = [
      ['3.5', '-3', 'measurements[1].significand 3.5 is not an integer'],
      ['0 / 0', '-3', 'measurements[1].significand NaN is not a finite number'],
      ['1', '200', 'measurements[1].orderOfMagnitude 200 is out of range -128..127'],
    ];
    for (const [significand, oom, message] of cases) {
      const run = await sandbox.runReportParser({ isolationKey: 'env-a', source: parser(significand, oom), args: { payload: '0102', device: device() } });
      expect(run).toMatchObject({ ok: false, error: { kind: 'invalid-result', message }, logs: ['raw 258'] });
    }
  });

  it("gives the parser's exec only addLog and the converters", async () => {
    const source =
      'function handle(a: unknown, exec: Record<string, unknown>) { return { generatedAt: new Date(), measurements: [], fields: { keys: Object.keys(exec).sort() } }; }';
    const run = await sandbox.runReportParser({ isolationKey: 'env-a', source, args: { payload: '', device: device() } });
    expect(run.ok && run.result.fields).toEqual({ keys: ['addLog', 'base64ToUInt8Array', 'hexToUInt8Array', 'uInt8ArrayToBase64', 'uInt8ArrayToHex'] });
  });
});

describe('identifier runs', () => {
  it('returns deviceTypeHashId and deviceIdentifier, validated', async () => {
    const source = `function handle(args: { certificate: { subjects: Subject[][] } }) {
      const cn = args.certificate.subjects[0].find((a) => a.key.value === "CN");
      return { deviceTypeHashId: "dt1", deviceIdentifier: cn.value.value };
    }`;
    const args = { certificate: { subjects: [[{ key: { encoding: 'utf8', value: 'CN' }, value: { encoding: 'utf8', value: 'SN-9' } }]] } };
    expect(await sandbox.runIdentifier({ isolationKey: 'env-a', source, args })).toMatchObject({
      ok: true,
      result: { deviceTypeHashId: 'dt1', deviceIdentifier: 'SN-9' },
    });
    const bad = await sandbox.runIdentifier({ isolationKey: 'env-a', source: 'function handle() { return { deviceTypeHashId: "dt1" }; }', args });
    expect(bad).toMatchObject({ ok: false, error: { kind: 'invalid-result', message: /deviceIdentifier/ } });
  });
});

describe('failure isolation', () => {
  const expectRecovery = async (key: string) => {
    expect(await good(key)).toMatchObject({ ok: true, result: { statusCode: 200 } });
    expect(await good(`${key}-other`)).toMatchObject({ ok: true, result: { statusCode: 200 } });
  };

  it('a handler that throws: kind error with the message, logs kept', async () => {
    const source = 'function handle(a: Arguments, exec: Exec) { exec.addLog("step 1"); exec.offerFirmware("fw"); throw new RangeError("boom " + 42); }';
    const run = await sandbox.runEventHandler({ isolationKey: 'fail-throw', source, args: reportLateArgs() });
    expect(run).toMatchObject({ ok: false, error: { kind: 'error', message: 'RangeError: boom 42' }, logs: ['step 1'], calls: [{ name: 'offerFirmware' }] });
    const nonError = await sandbox.runEventHandler({ isolationKey: 'fail-throw', source: 'function handle() { throw { code: 7 }; }', args: reportLateArgs() });
    expect(nonError).toMatchObject({ ok: false, error: { kind: 'error', message: 'Error: Uncaught {"code":7}' } });
    const topLevel = await sandbox.runEventHandler({
      isolationKey: 'fail-throw',
      source: 'const x: number = 1;\nthrow new Error("at load");\nfunction handle() {}',
      args: reportLateArgs(),
    });
    expect(topLevel).toMatchObject({ ok: false, error: { kind: 'error', message: /at load/ } });
    await expectRecovery('fail-throw');
  });

  it("a thrown error names the line and column of the supplier's TypeScript source, not of the compiled JavaScript", async () => {
    // the types and the enum make the compiled JavaScript's lines and columns differ from the source's
    const source = [
      'interface Reading { volts: number }',
      'enum Level { Low, High }',
      'type Pair = [Reading, Level];',
      'function handle(args: Arguments, exec: Exec): void {',
      '  const pair: Pair = [{ volts: 3 }, Level.High];',
      '  exec.addLog("before");',
      '  if (pair[1] === Level.High) throw new TypeError("too high: " + pair[0].volts);',
      '}',
    ].join('\n');
    const run = await sandbox.runEventHandler({ isolationKey: 'fail-position', source, args: reportLateArgs() });
    expect(run).toMatchObject({ ok: false, error: { kind: 'error', message: 'TypeError: too high: 3', line: 7, column: 37 } });
  });

  it("a thrown error still names the supplier's line after the compiled code's source map left the cache", async () => {
    const source = 'type N = number;\nfunction handle(args: Arguments, exec: Exec): void {\n  const n: N = 1;\n  throw new Error("late " + n);\n}';
    const first = await sandbox.runEventHandler({ isolationKey: 'fail-evicted', source, args: reportLateArgs() });
    expect(first).toMatchObject({ ok: false, error: { line: 4 } });
    // the source is still served from the front cache; its source map is gone, as after eviction by size
    forgetSourceMaps();
    const again = await sandbox.runEventHandler({ isolationKey: 'fail-evicted', source, args: reportLateArgs() });
    expect(again).toMatchObject({ ok: false, error: { kind: 'error', message: 'Error: late 1', line: 4, column: 9 } });
  });

  it("an error thrown by the code's top level names its line in the supplier's source", async () => {
    const source = 'interface A { b: number }\nconst a: A = { b: 1 };\nif (a.b === 1) throw new Error("at load");\nfunction handle() {}';
    const run = await sandbox.runEventHandler({ isolationKey: 'fail-position', source, args: reportLateArgs() });
    expect(run).toMatchObject({ ok: false, error: { kind: 'error', line: 3, column: 22 } });
  });

  it('while(true){} is stopped as kind timeout, logs gathered so far kept', async () => {
    const source = 'function handle(a: Arguments, exec: Exec) { exec.addLog("looping"); exec.markCommandAsSent("c"); while (true) {} }';
    // stopped by the time limit (kind timeout, not a hang: the test's own timeout would fail it), after it ran (its log and call kept)
    const run = await sandbox.runEventHandler({ isolationKey: 'fail-loop', source, args: reportLateArgs() });
    expect(run).toMatchObject({ ok: false, error: { kind: 'timeout' }, logs: ['looping'], calls: [{ name: 'markCommandAsSent' }] });
    const topLevel = await sandbox.runEventHandler({ isolationKey: 'fail-loop', source: 'while (true) {}\nfunction handle() {}', args: reportLateArgs() });
    expect(topLevel).toMatchObject({ ok: false, error: { kind: 'timeout' } });
    // an endless microtask chain started by handle is covered by the same limit (each link dropped, so
    // the chain runs into the time limit rather than, on a fast host, the memory limit)
    const micro = 'function handle() { Promise.resolve().then(function f(): void { void Promise.resolve().then(f); }); return { statusCode: 200 }; }';
    expect(await sandbox.runEventHandler({ isolationKey: 'fail-loop', source: micro, args: requestArgs() })).toMatchObject({
      ok: false,
      error: { kind: 'timeout' },
    });
    await expectRecovery('fail-loop');
  });

  it('unbounded allocation is stopped as kind memory; the isolate is recreated', async () => {
    const sandbox = memSandbox;
    const good = (isolationKey: string) => sandbox.runEventHandler({ isolationKey, source: GOOD_HANDLER, args: requestArgs() });
    const source = 'function handle(a: Arguments, exec: Exec) { exec.addLog("allocating"); const big = []; while (true) big.push(new Array(1e6).fill(1)); }';
    await good('fail-mem');
    const run = await sandbox.runEventHandler({ isolationKey: 'fail-mem', source, args: reportLateArgs() });
    expect(run).toMatchObject({ ok: false, error: { kind: 'memory' } });
    const big = await sandbox.runEventHandler({
      isolationKey: 'fail-mem',
      source: 'function handle() { let s = "x"; while (true) s = s + s; }',
      args: reportLateArgs(),
    });
    expect(big.ok).toBe(false);
    if (!big.ok) expect(['memory', 'error']).toContain(big.error.kind); // V8: "Invalid string length" may come first
    const buffers = await sandbox.runEventHandler({
      isolationKey: 'fail-mem',
      source: 'function handle() { const a = []; while (true) a.push(new Uint8Array(1 << 24)); }',
      args: reportLateArgs(),
    });
    expect(buffers.ok).toBe(false);
    expect(await good('fail-mem')).toMatchObject({ ok: true, result: { statusCode: 200 } });
    expect(await good('fail-mem-other')).toMatchObject({ ok: true, result: { statusCode: 200 } });
  });

  it('a bad run concurrent with good runs: the good ones succeed', async () => {
    const loop = 'function handle() { while (true) {} }';
    const mem = 'function handle() { const a = []; while (true) a.push(new Array(1e6).fill(1)); }';
    const runs = await Promise.all([
      sandbox.runEventHandler({ isolationKey: 'conc-bad', source: loop, args: reportLateArgs() }),
      memSandbox.runEventHandler({ isolationKey: 'conc-mem', source: mem, args: reportLateArgs() }),
      ...Array.from({ length: 20 }, (_, i) => good(`conc-good-${i % 4}`)),
      ...Array.from({ length: 5 }, (_, i) => memSandbox.runEventHandler({ isolationKey: `conc-good-${i}`, source: GOOD_HANDLER, args: requestArgs() })),
      // same isolate as the endless loop: queued behind it, still gets its own time budget
      good('conc-bad'),
    ]);
    expect(runs[0]).toMatchObject({ ok: false, error: { kind: 'timeout' } });
    expect(runs[1]).toMatchObject({ ok: false, error: { kind: 'memory' } });
    for (const r of runs.slice(2)) expect(r).toMatchObject({ ok: true, result: { statusCode: 200 } });
  });
});

describe('batches: the runs of one context that arrive together share one call into the isolate', () => {
  // the request body says what the run does: 'ok', 'throw', 'loop', 'eat' (memory), or a number of ms to busy-wait
  const SCRIPTED = `var n = 0;
function handle(a: Arguments, exec: Exec) {
  n++;
  const what = a.event.type === 'incomingRequest' && a.event.webRequest.body ? (a.event.webRequest.body as { data: unknown }).data : 'ok';
  exec.addLog("run " + n + " " + what);
  if (what === 'throw') throw new Error('thrown on purpose');
  if (what === 'loop') while (true) {}
  if (what === 'eat') { const a = []; while (true) a.push(new Array(1e6).fill(1)); }
  if (typeof what === 'number') { const end = Date.now() + what; while (Date.now() < end) {} }
  return { statusCode: 200, body: n };
}`;
  const runAll = (box: Sandbox, key: string, whats: unknown[]) =>
    Promise.all(whats.map((what) => box.runEventHandler({ isolationKey: key, source: SCRIPTED, args: requestArgs({ type: 'json', data: what }) })));
  const bodyOf = (r: Awaited<ReturnType<Sandbox['runEventHandler']>>) => (r.ok ? (r.result!.body as { data: unknown }).data : r.error.kind);

  it('32 runs together take one or two isolate calls, each answered with its own result and logs', async () => {
    await runAll(sandbox, 'batch-calls', ['ok']); // prepares the context
    const before = sandbox.isolateCalls;
    const runs = await runAll(
      sandbox,
      'batch-calls',
      Array.from({ length: 32 }, () => 'ok'),
    );
    expect(sandbox.isolateCalls - before).toBeLessThanOrEqual(2);
    expect(runs.map(bodyOf)).toEqual(Array.from({ length: 32 }, (_, i) => i + 2));
    runs.forEach((r, i) => expect(r.logs).toEqual([`run ${i + 2} ok`]));
  });

  it('a run that throws fails alone; the runs after it go on in a fresh context', async () => {
    const runs = await runAll(sandbox, 'batch-throw', ['ok', 'ok', 'throw', 'ok', 'ok']);
    expect(runs.map(bodyOf)).toEqual([1, 2, 'error', 1, 2]);
    expect(runs[2]).toMatchObject({ ok: false, error: { message: 'Error: thrown on purpose' }, logs: ['run 3 throw'] });
  });

  it('a run that loops times out alone, with its own logs; the others of its batch succeed', async () => {
    // the batch's own time limit, then the looping run alone with a whole one (a run held longer fails by the test's timeout)
    const runs = await runAll(sandbox, 'batch-loop', ['ok', 'ok', 'loop', 'ok', 'ok', 'ok']);
    expect(runs.map((r) => r.ok)).toEqual([true, true, false, true, true, true]);
    expect(runs[2]).toMatchObject({ ok: false, error: { kind: 'timeout' }, logs: [expect.stringMatching(/^run \d+ loop$/)] });
  });

  it('a run that eats memory fails alone as kind memory; the others of its batch succeed', async () => {
    const runs = await runAll(memSandbox, 'batch-eat', ['ok', 'ok', 'eat', 'ok']);
    expect(runs.map((r) => (r.ok ? 'ok' : r.error.kind))).toEqual(['ok', 'ok', 'memory', 'ok']);
  });

  it('slow runs whose sum is over the time limit all succeed: a batch starts no run once a quarter of the limit is spent', async () => {
    const runs = await runAll(sandbox, 'batch-slow', [0.4 * TIMEOUT, 0.4 * TIMEOUT, 0.4 * TIMEOUT, 0.4 * TIMEOUT]);
    expect(runs.map((r) => r.ok)).toEqual([true, true, true, true]);
  });

  it('maxBatchRuns 1 runs each alone', async () => {
    const single = new Sandbox({ timeoutMs: TIMEOUT, maxBatchRuns: 1 });
    try {
      const runs = await runAll(single, 'batch-off', ['ok', 'ok', 'ok', 'ok']);
      expect(runs.every((r) => r.ok)).toBe(true);
      expect(single.isolateCalls).toBe(4);
    } finally {
      single.dispose();
    }
  });
});

describe('isolation', () => {
  it("supplier A's globals are invisible to supplier B", async () => {
    const setter =
      'var shared = "from A";\nfunction handle() { (globalThis as any).leak = "A was here"; Object.prototype.polluted = 1; return { statusCode: 200 }; }';
    const reader = `function handle() {
      return { statusCode: 200, body: { leak: typeof (globalThis as any).leak, shared: typeof (globalThis as any).shared, polluted: typeof ({} as any).polluted } };
    }`;
    expect(await sandbox.runEventHandler({ isolationKey: 'supplier-A', source: setter, args: requestArgs() })).toMatchObject({ ok: true });
    const b = await sandbox.runEventHandler({ isolationKey: 'supplier-B', source: reader, args: requestArgs() });
    expect(b).toMatchObject({ ok: true, result: { body: { data: { leak: 'undefined', shared: 'undefined', polluted: 'undefined' } } } });
    // even the same code in another context of supplier A does not see the other context's globals
    const a2 = await sandbox.runEventHandler({ isolationKey: 'supplier-A', source: reader, args: requestArgs() });
    expect(a2).toMatchObject({ ok: true, result: { body: { data: { leak: 'undefined', polluted: 'undefined' } } } });
  });

  it('has no require, process, fetch, Buffer, setTimeout; has Date, JSON, Math, typed arrays', async () => {
    const source = `function handle() {
      const g = globalThis as any;
      const names = ["require", "process", "fetch", "Buffer", "setTimeout", "module", "XMLHttpRequest", "WebSocket", "importScripts", "handleRuntime"];
      const present: Record<string, string> = {};
      for (const n of names) present[n] = typeof g[n];
      let req: string;
      try { req = typeof require; } catch (e) { req = "throws"; }
      return { statusCode: 200, body: { present, req, processOnGlobal: typeof g.process,
        date: typeof Date, json: typeof JSON, math: Math.max(1, 2), u8: new Uint8Array([1, 2]).length, f64: typeof Float64Array,
        globals: Object.getOwnPropertyNames(globalThis).filter((k) => !/^[A-Z]/.test(k)).sort() } };
    }`;
    const run = await sandbox.runEventHandler({ isolationKey: 'env-a', source, args: requestArgs() });
    if (!run.ok) throw new Error(run.error.message);
    const data = (run.result!.body as { data: Record<string, unknown> }).data;
    expect(Object.values(data.present as Record<string, string>).every((t) => t === 'undefined')).toBe(true);
    expect(data).toMatchObject({ req: 'undefined', processOnGlobal: 'undefined', date: 'function', json: 'object', math: 2, u8: 2, f64: 'function' });
    expect(data.globals).toContain('handle');
    expect(data.globals).not.toContain('run');
  });

  it('recycles the context: a global does not survive past the threshold', async () => {
    const small = new Sandbox({ recycleAfterRuns: 3 });
    try {
      const source = 'var counter = 0;\nfunction handle() { counter++; return { statusCode: 200, body: counter }; }';
      const seen: unknown[] = [];
      for (let i = 0; i < 7; i++) {
        const run = await small.runEventHandler({ isolationKey: 'recycle', source, args: requestArgs() });
        seen.push(run.ok ? (run.result!.body as { data: unknown }).data : run.error.message);
      }
      expect(seen).toEqual([1, 2, 3, 1, 2, 3, 1]);
      // a failed run also recycles
      const flaky = 'var n = 0;\nfunction handle() { n++; if (n === 2) throw new Error("second"); return { statusCode: 200, body: n }; }';
      const bodies: unknown[] = [];
      for (let i = 0; i < 4; i++) {
        const run = await small.runEventHandler({ isolationKey: 'recycle', source: flaky, args: requestArgs() });
        bodies.push(run.ok ? (run.result!.body as { data: unknown }).data : 'error');
      }
      expect(bodies).toEqual([1, 'error', 1, 'error']);
    } finally {
      small.dispose();
    }
  });

  it('disposes least recently used isolates beyond maxIsolates', async () => {
    const small = new Sandbox({ maxIsolates: 2 });
    try {
      for (const key of ['k1', 'k2', 'k3', 'k1']) {
        expect(await small.runEventHandler({ isolationKey: key, source: GOOD_HANDLER, args: requestArgs() })).toMatchObject({ ok: true });
      }
      expect(small.isolateCount).toBe(2);
    } finally {
      small.dispose();
    }
  });
});
