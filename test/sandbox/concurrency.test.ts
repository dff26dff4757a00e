import { afterAll, expect, it } from 'vitest';
import { Sandbox } from '../../src/sandbox/runner.ts';
import { device, requestArgs } from './fixtures.ts';

const HANDLER = `const reportTypeHashId = "rt1";
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== "incomingRequest") return;
  const body = args.event.webRequest.body;
  exec.parseReport({ reportTypeHashId, payload: body.data });
  exec.increaseReportingCounter();
  return { statusCode: 204 };
}`;
const PARSER = `function handle(args: { payload: string }, exec: Exec) {
  const b = exec.hexToUInt8Array(args.payload);
  return { generatedAt: new Date(), measurements: [
    { channelIndex: 0, quantityHashId: "temp", orderOfMagnitude: -2, significand: ((b[0] << 8) | b[1]) * 1.0 },
    { channelIndex: 1, quantityHashId: "hum", orderOfMagnitude: -1, significand: b[2] },
  ] };
}`;

const sandbox = new Sandbox();
afterAll(() => sandbox.dispose());

it('2,000 handler and parser runs of four suppliers in flight together each get their own answer, in shared isolate calls', async () => {
  const N = 2000;
  const CONCURRENCY = 16;
  const KEYS = 4;
  const dev = device();
  const callsBefore = sandbox.isolateCalls;
  /** report i: its payload's three bytes and the significands its parser must find in them */
  const one = async (i: number) => {
    const bytes = [(i >> 8) & 0xff, i & 0xff, i % 100];
    const isolationKey = `concurrent-${i % KEYS}`;
    const h = await sandbox.runEventHandler({ isolationKey, source: HANDLER, args: requestArgs({ type: 'string', data: Buffer.from(bytes).toString('hex') }) });
    if (!h.ok) throw new Error(h.error.message);
    const call = h.calls[0];
    if (call.name !== 'parseReport') throw new Error('no parseReport');
    const p = await sandbox.runReportParser({ isolationKey, source: PARSER, args: { payload: call.args.payload, device: dev } });
    if (!p.ok) throw new Error(p.error.message);
    return { i, significands: p.result.measurements.map((m) => m.significand), expected: [i, i % 100] };
  };
  let next = 0;
  const results: Awaited<ReturnType<typeof one>>[] = [];
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < N) results.push(await one(next++));
    }),
  );
  expect(results).toHaveLength(N);
  for (const r of results) expect(r.significands, `report ${r.i}`).toEqual(r.expected);
  // runs that arrive together share a call into their isolate
  expect(sandbox.isolateCalls - callsBefore).toBeLessThan(2 * N);
}, 120_000);
