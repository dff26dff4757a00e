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

it('measures handler + parser throughput (printed, not asserted)', async () => {
  const N = 5000;
  const CONCURRENCY = 16;
  const KEYS = 4;
  const args = requestArgs({ type: 'string', data: '0a1b2c' });
  const dev = device();
  const one = async (i: number) => {
    const isolationKey = `perf-${i % KEYS}`;
    const h = await sandbox.runEventHandler({ isolationKey, source: HANDLER, args });
    if (!h.ok) throw new Error(h.error.message);
    const call = h.calls[0];
    if (call.name !== 'parseReport') throw new Error('no parseReport');
    const p = await sandbox.runReportParser({ isolationKey, source: PARSER, args: { payload: call.args.payload, device: dev } });
    if (!p.ok) throw new Error(p.error.message);
  };
  for (let i = 0; i < 200; i++) await one(i); // warm up
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => { while (next < N) await one(next++); }));
  const seconds = (performance.now() - t0) / 1000;
  const reports = N / seconds;
  console.log(`sandbox throughput: ${N} reports (handler + parser) in ${seconds.toFixed(2)} s = ${reports.toFixed(0)} reports/s = ${(2 * reports).toFixed(0)} runs/s (concurrency ${CONCURRENCY}, ${KEYS} isolation keys)`);
  expect(reports).toBeGreaterThan(0);
}, 120_000);
