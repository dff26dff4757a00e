// The times a condition report and its measurements may carry, whoever made them: an import, a user's manual
// report, a supplier's report parser. Reports and measurements are partitioned by week on that time (migration 032,
// src/monitoring/partitions/weeks.ts): every week a row lands in becomes a partition at the next retention run, so
// an import of one line a week since 1900 asked for 6,600 partitions (issue 38), and year 0001 for 100,000.
//
// From 2000-01-01: historic readings digitised from years back are legitimate, and the longest retention an
// environment may set (measurementsExpirationDays 9999, 27 years) reaches back to about then; it also bounds the
// partitions a tenant can make to 52 a year since 2000. Up to 1 day ahead of now: a device clock or a time zone
// that is hours off still reports, a wrong year does not. Here in the kernel, not in monitoring/, because the
// sandbox (a library below the features) checks a parser's result against it too.

const DAY_MS = 24 * 3600_000;

export const REPORT_DATE_WINDOW = {
  /** the earliest time a report or measurement may carry */
  earliest: new Date('2000-01-01T00:00:00.000Z'),
  /** how far past the time it is checked at a report or measurement may lie */
  aheadMs: DAY_MS,
} as const;

/** The window in words, for API descriptions and docs. */
export const REPORT_DATE_RULE = `not before ${REPORT_DATE_WINDOW.earliest.toISOString()} and at most 1 day after the time it is stored`;

/** Why `at` lies outside REPORT_DATE_WINDOW as of `now` ("lies before 2000-01-01T00:00:00.000Z, ..."), or null when it lies inside. */
export function reportDateProblem(at: Date, now: Date = new Date()): string | null {
  const t = at.getTime();
  if (t < REPORT_DATE_WINDOW.earliest.getTime()) return `lies before ${REPORT_DATE_WINDOW.earliest.toISOString()}, the earliest time a report may carry`;
  const latest = now.getTime() + REPORT_DATE_WINDOW.aheadMs;
  if (t > latest) return `lies more than 1 day ahead (after ${new Date(latest).toISOString()})`;
  return null;
}
