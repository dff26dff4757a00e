import { Pool } from 'undici';
import type { Queryable } from '../app/db.ts';
import { ingestReportsJson, type ConditionReportIn } from '../monitoring/reports/store.ts';
import { metrics } from '../app/metrics.ts';
import { Batcher } from '../app/batcher.ts';
import { isTransient, StoreUnavailableError } from './failures.ts';

/** Answers of the monitoring core that refuse the reports themselves: sending them again would not help. */
const REFUSED_AS_SENT = new Set([400, 413, 422]);

/** What a probe of the monitoring core found. */
export type CoreProbe = { state: 'ok' } | { state: 'unreachable' | 'misconfigured'; reason: string };

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

  private readonly afterStore: ((reports: ConditionReportIn[]) => Promise<unknown>) | null;

  /** `afterStore`: runs on each batch once it is stored, before the batch's pushes resolve (threshold evaluation). */
  constructor(target: { url: string; token: string } | { db: Queryable }, opts: { afterStore?: (reports: ConditionReportIn[]) => Promise<unknown> } = {}) {
    this.afterStore = opts.afterStore ?? null;
    this.sink =
      'db' in target
        ? { kind: 'local', db: target.db }
        : { kind: 'http', pool: new Pool(target.url, { connections: 4, pipelining: 1, keepAliveTimeout: 30_000 }), token: target.token };
    this.batcher = new Batcher((reports) => this.send(reports), { maxItems: 250, maxDelayMs: 2, maxConcurrentFlushes: 4, splitOn: (err) => !isTransient(err) });
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
    if (this.sink.kind === 'local') await ingestReportsJson(this.sink.db, body);
    else await this.post(body);
    metrics.reportsStored.inc(reports.length);
    if (this.afterStore) await this.afterStore(reports);
  }

  /**
   * Whether the monitoring core takes reports: an empty batch, sent as every batch is. A core that answers with
   * anything but 200 is misconfigured (a wrong MONITORING_CORE_URL or INTERNAL_TOKEN); one that does not answer is unreachable.
   */
  async probe(): Promise<CoreProbe> {
    if (this.sink.kind === 'local') return { state: 'ok' };
    try {
      await this.post('{"reports":[]}');
      return { state: 'ok' };
    } catch (err) {
      const status = (err as { statusCode?: number }).statusCode;
      return { state: status === undefined ? 'unreachable' : 'misconfigured', reason: (err as Error).message };
    }
  }

  private async post(body: string): Promise<void> {
    if (this.sink.kind !== 'http') return;
    const res = await this.sink.pool.request({
      path: '/internal/condition-reports',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.sink.token}` },
      body,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    const text = await res.body.text();
    if (res.statusCode === 200) return;
    const message = `monitoring core answered ${res.statusCode}: ${text.slice(0, 200)}`;
    // anything but a refusal of the reports (a 404 of a wrong URL, a 401 of a wrong token, a 5xx) is waited out
    throw Object.assign(REFUSED_AS_SENT.has(res.statusCode) ? new Error(message) : new StoreUnavailableError(message), { statusCode: res.statusCode });
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
