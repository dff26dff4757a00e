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

export interface IssueEventFacts {
  kind: IssueEventKind;
  level: number;
  at: Date;
  comment: { text: string; author: string } | null;
}

export interface Reader {
  locale: string | null;
  timezone: string | null;
}

export interface MailText {
  subject: string;
  text: string;
}

/** The mail's words in the reader's language (en, or nl for a Dutch locale); Intl formats its dates and numbers. */
const WORDS = {
  en: {
    levels: ['minor', 'serious', 'critical'],
    limits: { criticallyHigh: 'critically high', criticallyLow: 'critically low', high: 'high', low: 'low' },
    opened: (level: string, title: string) => `New ${level} issue: ${title}`,
    raised: (level: string, title: string) => `Issue now ${level}: ${title}`,
    closed: (title: string) => `Issue closed: ${title}`,
    comment: (author: string | null, title: string) => `${author ?? 'Someone'} commented on: ${title}`,
    issue: 'Issue',
    level: 'Level',
    where: 'Where: pin group',
    pin: 'pin',
    quantity: 'Quantity',
    lastValue: 'last value',
    beyond: (limit: string, value: string) => `beyond the ${limit} limit of ${value}`,
    within: 'within its thresholds',
    measured: 'measured',
    since: 'Since',
    closedAt: 'Closed',
    notifications: (n: number) => `${n} issue notifications`,
  },
  nl: {
    levels: ['klein', 'ernstig', 'kritiek'],
    limits: { criticallyHigh: 'kritiek hoge', criticallyLow: 'kritiek lage', high: 'hoge', low: 'lage' },
    opened: (level: string, title: string) => `Nieuwe melding (${level}): ${title}`,
    raised: (level: string, title: string) => `Melding nu ${level}: ${title}`,
    closed: (title: string) => `Melding gesloten: ${title}`,
    comment: (author: string | null, title: string) => `${author ?? 'Iemand'} reageerde op: ${title}`,
    issue: 'Melding',
    level: 'Niveau',
    where: 'Waar: pingroep',
    pin: 'pin',
    quantity: 'Grootheid',
    lastValue: 'laatste waarde',
    beyond: (limit: string, value: string) => `voorbij de ${limit} grens van ${value}`,
    within: 'binnen de drempels',
    measured: 'gemeten',
    since: 'Sinds',
    closedAt: 'Gesloten',
    notifications: (n: number) => `${n} meldingen`,
  },
};
type Words = typeof WORDS.en;

/** The language of a reader's mail: nl for a Dutch locale (nl, nl-NL, nl-BE), else en. */
export function mailLanguage(locale: string | null | undefined): 'en' | 'nl' {
  return /^nl\b/i.test(locale ?? '') ? 'nl' : 'en';
}

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
function crossedLimit(limits: Limits, value: ValuePair, words: Words): { name: string; limit: ValuePair } | null {
  const order: [keyof Limits & keyof Words['limits'], (c: number) => boolean][] = [
    ['criticallyHigh', (c) => c > 0],
    ['criticallyLow', (c) => c < 0],
    ['high', (c) => c > 0],
    ['low', (c) => c < 0],
  ];
  for (const [key, beyond] of order) {
    const limit = storedLimit(limits[key]);
    if (limit && beyond(compare(value, limit))) return { name: words.limits[key], limit };
  }
  return null;
}

const levelName = (w: Words, level: number) => w.levels[level] ?? String(level);
const headline = (w: Words, f: IssueFacts, e: IssueEventFacts): string => {
  switch (e.kind) {
    case 'opened':
      return w.opened(levelName(w, e.level), f.title);
    case 'raised':
      return w.raised(levelName(w, e.level), f.title);
    case 'closed':
      return w.closed(f.title);
    case 'comment':
      return w.comment(e.comment?.author ?? null, f.title);
  }
};

const SUBJECT_ORDER: IssueEventKind[] = ['closed', 'opened', 'raised', 'comment'];

/** One mail about one issue (one or more of its events, oldest first), for `reader`. */
export function issueMail(facts: IssueFacts, events: IssueEventFacts[], reader: Reader): MailText {
  const fmt = formatters(reader);
  const w = WORDS[mailLanguage(reader.locale)];
  // the subject names what matters most: an issue opened with its first comment is a new issue
  const first = [...events].sort((a, b) => SUBJECT_ORDER.indexOf(a.kind) - SUBJECT_ORDER.indexOf(b.kind))[0];
  const lines: string[] = [];
  for (const e of events) {
    lines.push(`${headline(w, facts, e)} (${fmt.date(e.at)})`);
    if (e.comment) lines.push('', `  ${e.comment.text.split('\n').join('\n  ')}`, '');
  }
  lines.push('', `${w.issue} ${facts.hashId}: ${facts.title}`, `${w.level}: ${levelName(w, facts.level)}`);
  lines.push(`${w.where} ${facts.pinGroupName}${facts.pinNames.length > 0 ? `, ${w.pin} ${facts.pinNames.join(', ')}` : ''}`);
  if (facts.quantityName) {
    const unit = facts.unit && facts.unit !== '1' ? ` ${facts.unit}` : '';
    let value = `${w.quantity}: ${facts.quantityName}`;
    if (facts.lastValue) {
      value += `, ${w.lastValue} ${fmt.number(facts.lastValue)}${unit}`;
      const crossed = facts.limits ? crossedLimit(facts.limits, facts.lastValue, w) : null;
      if (crossed) value += `, ${w.beyond(crossed.name, `${fmt.number(crossed.limit)}${unit}`)}`;
      else if (facts.limits) value += `, ${w.within}`;
      if (facts.lastMeasuredAt) value += ` (${w.measured} ${fmt.date(facts.lastMeasuredAt)})`;
    }
    lines.push(value);
  }
  lines.push(`${w.since}: ${fmt.date(facts.startAt)}`);
  if (facts.closedAt) lines.push(`${w.closedAt}: ${fmt.date(facts.closedAt)}`);
  return { subject: headline(w, facts, first), text: lines.join('\n') };
}

/** Several mails gathered into one (the digest rule: src/notifications/issue-notifier.ts). */
export function digestMail(parts: MailText[], locale: string | null = null): MailText {
  if (parts.length === 1) return parts[0];
  const title = WORDS[mailLanguage(locale)].notifications(parts.length);
  const text = [
    `${title}:`,
    '',
    ...parts.map((p, i) => `${i + 1}. ${p.subject}`),
    '',
    ...parts.flatMap((p, i) => ['-'.repeat(60), `${i + 1}. ${p.subject}`, '', p.text, '']),
  ].join('\n');
  return { subject: title, text: text.trimEnd() };
}
