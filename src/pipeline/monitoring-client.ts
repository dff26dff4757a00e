import { Pool } from 'undici';
import type { Queryable } from '../app/db.ts';
import { ingestReportsJson, type ConditionReportIn } from '../monitoring/reports/store.ts';
import { Batcher } from './batcher.ts';

/** Where a batch of reports goes: the monitoring core's HTTP intake, or its store in this very process. */
type Sink = { kind: 'http'; pool: Pool; token: string } | { kind: 'local'; db: Queryable };

/**
 * Pushes condition reports to the monitoring core, batched; each push resolves when its batch is
 * stored. Over HTTP with undici when the core is another process; when it is this process (role
 * `all`, or `api` beside `worker`) the batch goes straight to the core's store, the same statement
 * its HTTP route runs: no undici, no loopback HTTP request and no Fastify route per batch. Both
 * ways are idempotent by report hashId.
 */
export class MonitoringCoreClient {
  private readonly sink: Sink;
  private readonly batcher: Batcher<ConditionReportIn>;

  constructor(target: { url: string; token: string } | { db: Queryable }) {
    this.sink = 'db' in target
      ? { kind: 'local', db: target.db }
      : { kind: 'http', pool: new Pool(target.url, { connections: 4, pipelining: 1, keepAliveTimeout: 30_000 }), token: target.token };
    this.batcher = new Batcher((reports) => this.send(reports), { maxItems: 250, maxDelayMs: 2, maxConcurrentFlushes: 4 });
  }

  /** Whether batches are stored in this process rather than sent over HTTP. */
  get local(): boolean {
    return this.sink.kind === 'local';
  }

  push(report: ConditionReportIn): Promise<void> {
    return this.batcher.add(report);
  }

  private async send(reports: ConditionReportIn[]): Promise<void> {
    const body = JSON.stringify({ reports });
    if (this.sink.kind === 'local') {
      await ingestReportsJson(this.sink.db, body);
      return;
    }
    const res = await this.sink.pool.request({
      path: '/internal/condition-reports',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.sink.token}` },
      body,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`monitoring core answered ${res.statusCode}: ${text.slice(0, 200)}`);
  }

  async close(): Promise<void> {
    await this.batcher.drain();
    if (this.sink.kind === 'http') await this.sink.pool.close();
  }
}

/**
 * Whether `url` is the API of this process: a loopback (or unspecified) address on `apiPort`.
 * Then a worker beside the API role stores reports directly instead of posting them to itself.
 */
export function isOwnApi(url: string, apiPort: number): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  const port = parsed.port === '' ? (parsed.protocol === 'https:' ? 443 : 80) : Number(parsed.port);
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  return parsed.protocol === 'http:' && port === apiPort && ['127.0.0.1', 'localhost', '::1', '0.0.0.0', '::'].includes(host);
}
