import type { Logger } from '../app/logger.ts';
import { OutageLog } from '../app/outage-log.ts';
import type { CoreProbe, MonitoringCoreClient } from './monitoring-client.ts';

const PROBE_INTERVAL_MS = 5000;
const START_RETRY_MS = 1000;

/**
 * Whether the monitoring core takes reports: asked before a worker's first job (`untilAnswers`) and then every
 * PROBE_INTERVAL_MS, so /health says when it does not answer and the worker takes no batch locally meanwhile. An
 * outage is one warn line when it starts and one info line when it ends.
 */
export class CoreWatch {
  readonly #core: Pick<MonitoringCoreClient, 'probe' | 'local'>;
  readonly #url: string;
  readonly #outage: OutageLog;
  #problem: string | null = null;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;

  constructor(core: Pick<MonitoringCoreClient, 'probe' | 'local'>, url: string, log: Logger) {
    this.#core = core;
    this.#url = url;
    this.#outage = new OutageLog(log, `the monitoring core at ${url} does not answer: reports wait in the queue`, 'the monitoring core answers again');
  }

  /** why reports cannot be delivered now, or null */
  get problem(): string | null {
    return this.#problem;
  }

  async #probe(): Promise<CoreProbe> {
    const probe = await this.#core.probe();
    this.#problem = probe.state === 'ok' ? null : `monitoring core ${probe.state}: ${probe.reason}`;
    if (probe.state === 'ok') this.#outage.up();
    else this.#outage.down(new Error(probe.reason));
    return probe;
  }

  /**
   * Resolves once the core answers (or the watch is closed), then keeps asking in the background. A wrong URL or
   * token would hold every report forever: that rejects instead.
   */
  async untilAnswers(): Promise<void> {
    for (let probe = await this.#probe(); probe.state !== 'ok'; probe = await this.#probe()) {
      if (probe.state === 'misconfigured')
        throw new Error(
          `MONITORING_CORE_URL ${this.#url} does not take condition reports (${probe.reason}): set it to the API of this deployment, with the same SECRET_KEY or INTERNAL_TOKEN`,
        );
      if (this.#closed) return;
      await new Promise((r) => setTimeout(r, START_RETRY_MS));
    }
    this.#next();
  }

  #next(): void {
    if (this.#closed || this.#core.local) return;
    this.#timer = setTimeout(() => void this.#probe().finally(() => this.#next()), PROBE_INTERVAL_MS);
    this.#timer.unref();
  }

  get closed(): boolean {
    return this.#closed;
  }

  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
  }
}
