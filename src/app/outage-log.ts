import type { Logger } from './logger.ts';

/**
 * One warn line when something becomes unavailable and one info line when it is back, however many
 * callers run into it meanwhile (a store outage under load would otherwise log every job's every try).
 */
export class OutageLog {
  private since: number | null = null;

  private readonly log: Logger;
  private readonly downMessage: string;
  private readonly upMessage: string;

  constructor(log: Logger, downMessage: string, upMessage: string) {
    this.log = log;
    this.downMessage = downMessage;
    this.upMessage = upMessage;
  }

  down(err: unknown): void {
    if (this.since !== null) return;
    this.since = Date.now();
    this.log.warn({ err: (err as Error).message }, this.downMessage);
  }

  up(): void {
    if (this.since === null) return;
    this.log.info({ unavailableMs: Date.now() - this.since }, this.upMessage);
    this.since = null;
  }
}
