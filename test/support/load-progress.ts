// Waiting on a running load (reportUntil's outcome, filled as answers come) instead of sleeping through a phase of it.
import { expect } from 'vitest';
import type { LoadOutcome } from './report-world.ts';

/** An outcome for reportUntil to fill while it runs. */
export function liveOutcome(): LoadOutcome {
  return { accepted: [], byStatus: new Map() };
}

/** Resolves once the load has had `n` more answers of `status` than it had when called (60 s at most). */
export async function moreAnswered(outcome: LoadOutcome, status: number | null, n = 1, timeout = 60_000): Promise<void> {
  const from = outcome.byStatus.get(status) ?? 0;
  await expect
    .poll(() => outcome.byStatus.get(status) ?? 0, {
      timeout,
      interval: 50,
      message: `${n} more answers ${status} (answers: ${JSON.stringify([...outcome.byStatus])})`,
    })
    .toBeGreaterThanOrEqual(from + n);
}
