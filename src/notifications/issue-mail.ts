// What an issue mail says, written for one recipient: dates in their time zone, numbers in their locale
// (Intl), so "since when" and "the value against its threshold" read as they expect.

import { compare, storedLimit, type Limits, type ValuePair } from '../monitoring/thresholds/limits.ts';

export type IssueEventKind = 'opened' | 'raised' | 'closed' | 'comment';

/** An issue as its mail describes it. */
export interface IssueFacts {
  hashId: string;
  title: string;
  level: number;
  pinGroupName: string;
  pinNames: string[];
  quantityName: string | null;
  unit: string | null;
  lastValue: ValuePair | null;
  lastMeasuredAt: Date | null;
  limits: Limits | null;
  startAt: Date;
  closedAt: Date | null;
}

export interface IssueEventFacts { kind: IssueEventKind; level: number; at: Date; comment: { text: string; author: string } | null }

export interface Reader { locale: string | null; timezone: string | null }

export interface MailText { subject: string; text: string }

const LEVELS = ['minor', 'serious', 'critical'];

/** Intl formatters for the reader; a locale or time zone Intl does not know falls back to en / UTC. */
function formatters(reader: Reader) {
  const locale = (() => {
    try {
      return Intl.getCanonicalLocales(reader.locale ?? 'en')[0] ?? 'en';
    } catch {
      return 'en';
    }
  })();
  let dates: Intl.DateTimeFormat;
  try {
    dates = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'long', timeZone: reader.timezone ?? 'UTC' });
  } catch {
    dates = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'long', timeZone: 'UTC' });
  }
  const numbers = new Intl.NumberFormat(locale, { maximumFractionDigits: 6 });
  return { date: (d: Date) => dates.format(d), number: (v: ValuePair) => numbers.format(Number(`${v.significand}e${v.orderOfMagnitude}`)) };
}

/** The limit the value lies beyond, worst first (the one that set its level). */
function crossedLimit(limits: Limits, value: ValuePair): { name: string; limit: ValuePair } | null {
  const order: [keyof Limits, string, (c: number) => boolean][] = [
    ['criticallyHigh', 'critically high', (c) => c > 0], ['criticallyLow', 'critically low', (c) => c < 0],
    ['high', 'high', (c) => c > 0], ['low', 'low', (c) => c < 0],
  ];
  for (const [key, name, beyond] of order) {
    const limit = storedLimit(limits[key]);
    if (limit && beyond(compare(value, limit))) return { name, limit };
  }
  return null;
}

const HEADLINES: Record<IssueEventKind, (f: IssueFacts, e: IssueEventFacts) => string> = {
  opened: (f, e) => `New ${LEVELS[e.level] ?? e.level} issue: ${f.title}`,
  raised: (f, e) => `Issue now ${LEVELS[e.level] ?? e.level}: ${f.title}`,
  closed: (f) => `Issue closed: ${f.title}`,
  comment: (f, e) => `${e.comment?.author ?? 'Someone'} commented on: ${f.title}`,
};

const SUBJECT_ORDER: IssueEventKind[] = ['closed', 'opened', 'raised', 'comment'];

/** One mail about one issue (one or more of its events, oldest first), for `reader`. */
export function issueMail(facts: IssueFacts, events: IssueEventFacts[], reader: Reader): MailText {
  const fmt = formatters(reader);
  // the subject names what matters most: an issue opened with its first comment is a new issue
  const headline = [...events].sort((a, b) => SUBJECT_ORDER.indexOf(a.kind) - SUBJECT_ORDER.indexOf(b.kind))[0];
  const lines: string[] = [];
  for (const e of events) {
    lines.push(`${HEADLINES[e.kind](facts, e)} (${fmt.date(e.at)})`);
    if (e.comment) lines.push('', `  ${e.comment.text.split('\n').join('\n  ')}`, '');
  }
  lines.push('', `Issue ${facts.hashId}: ${facts.title}`, `Level: ${LEVELS[facts.level] ?? facts.level}`);
  lines.push(`Where: pin group ${facts.pinGroupName}${facts.pinNames.length > 0 ? `, pin ${facts.pinNames.join(', ')}` : ''}`);
  if (facts.quantityName) {
    const unit = facts.unit && facts.unit !== '1' ? ` ${facts.unit}` : '';
    let value = `Quantity: ${facts.quantityName}`;
    if (facts.lastValue) {
      value += `, last value ${fmt.number(facts.lastValue)}${unit}`;
      const crossed = facts.limits ? crossedLimit(facts.limits, facts.lastValue) : null;
      if (crossed) value += `, beyond the ${crossed.name} limit of ${fmt.number(crossed.limit)}${unit}`;
      else if (facts.limits) value += ', within its thresholds';
      if (facts.lastMeasuredAt) value += ` (measured ${fmt.date(facts.lastMeasuredAt)})`;
    }
    lines.push(value);
  }
  lines.push(`Since: ${fmt.date(facts.startAt)}`);
  if (facts.closedAt) lines.push(`Closed: ${fmt.date(facts.closedAt)}`);
  return { subject: HEADLINES[headline.kind](facts, headline), text: lines.join('\n') };
}

/** Several mails gathered into one (the digest rule: src/notifications/issue-notifier.ts). */
export function digestMail(parts: MailText[]): MailText {
  if (parts.length === 1) return parts[0];
  const text = [`${parts.length} issue notifications:`, '', ...parts.map((p, i) => `${i + 1}. ${p.subject}`), '',
    ...parts.flatMap((p, i) => ['-'.repeat(60), `${i + 1}. ${p.subject}`, '', p.text, ''])].join('\n');
  return { subject: `${parts.length} issue notifications`, text: text.trimEnd() };
}
