import { Pool } from 'undici';
import type { ConditionReportIn } from '../monitoring/reports/store.ts';
import { Batcher } from './batcher.ts';

/** Pushes condition reports to the monitoring core over HTTP, batched; each push resolves when its batch is stored. */
export class MonitoringCoreClient {
  private readonly pool: Pool;
  private readonly batcher: Batcher<ConditionReportIn>;
  private readonly token: string;

  constructor(baseUrl: string, token: string) {
    this.pool = new Pool(baseUrl, { connections: 4, pipelining: 1, keepAliveTimeout: 30_000 });
    this.token = token;
    this.batcher = new Batcher((reports) => this.send(reports), { maxItems: 250, maxDelayMs: 2, maxConcurrentFlushes: 4 });
  }

  push(report: ConditionReportIn): Promise<void> {
    return this.batcher.add(report);
  }

  private async send(reports: ConditionReportIn[]): Promise<void> {
    const res = await this.pool.request({
      path: '/internal/condition-reports',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.token}` },
      body: JSON.stringify({ reports }),
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`monitoring core answered ${res.statusCode}: ${text.slice(0, 200)}`);
  }

  async close(): Promise<void> {
    await this.batcher.drain();
    await this.pool.close();
  }
}
