// A device's connectivity counters (device getConnectivityCounters) per hour as charts: the built-in ones in
// three groups, the environment's own counter keys in a fourth; hours without a count are drawn as 0.
import { useMemo, useState } from 'preact/hooks';
import { api } from '../../api.ts';
import { TimeChart, type TimeSeries } from '../../charts/TimeChart.tsx';
import { formatNumber, messages } from '../../i18n.ts';
import { ErrorBox, Field, Loading, useAsync } from '../../ui.tsx';
import type { CounterEntry } from './types.ts';

const t = messages(
  {
    range: 'Period',
    day: 'Last 24 hours',
    week: 'Last 7 days',
    month: 'Last 31 days',
    contacts: 'Contacts per hour',
    reports: 'Reports per hour',
    code: 'Your code per hour',
    own: 'Your counters per hour',
    totals: 'Totals in this period',
    counter: 'Counter',
    total: 'Total',
    reload: 'Refresh',
  },
  {
    range: 'Periode',
    day: 'Laatste 24 uur',
    week: 'Laatste 7 dagen',
    month: 'Laatste 31 dagen',
    contacts: 'Contacten per uur',
    reports: 'Rapporten per uur',
    code: 'Je code per uur',
    own: 'Je eigen tellers per uur',
    totals: 'Totalen in deze periode',
    counter: 'Teller',
    total: 'Totaal',
    reload: 'Vernieuwen',
  },
);

const GROUPS: { title: 'contacts' | 'reports' | 'code'; keys: string[] }[] = [
  { title: 'contacts', keys: ['contacts', 'refusedContacts', 'handshakeFailures'] },
  { title: 'reports', keys: ['reports', 'reportFailures', 'reportsLate'] },
  { title: 'code', keys: ['handlerFailures', 'commandsSent', 'reportingCounter'] },
];
const BUILT_IN = new Set(GROUPS.flatMap((g) => g.keys));
const HOURS = { day: 24, week: 24 * 7, month: 24 * 31 };
const HOUR = 3600_000;

/** The hourly values of an entry over [from, to), every hour present (0 where the API left it out). */
export function hourly(entry: CounterEntry, from: number, to: number): [number, number][] {
  const byHour = new Map(entry.values.map((v) => [Date.parse(v.hour), v.value]));
  const points: [number, number][] = [];
  for (let h = Math.floor(from / HOUR) * HOUR; h < to; h += HOUR) points.push([h, byHour.get(h) ?? 0]);
  return points;
}

export function Counters({ deviceHashId }: { deviceHashId: string }) {
  const [range, setRange] = useState<keyof typeof HOURS>('day');
  const { data, error, loading, reload } = useAsync(
    async (signal) => {
      const to = Date.now();
      const from = to - HOURS[range] * HOUR;
      const entries = await api<CounterEntry[]>('GET', `/device/device/${encodeURIComponent(deviceHashId)}/connectivity-counters`, {
        signal,
        query: { from: new Date(from).toISOString(), to: new Date(to).toISOString() },
      });
      return { entries, from, to };
    },
    [deviceHashId, range],
  );

  const charts = useMemo(() => {
    if (!data) return [];
    const series = (entries: CounterEntry[]): TimeSeries[] => entries.map((e) => ({ label: e.name, points: hourly(e, data.from, data.to) }));
    const byKey = new Map(data.entries.map((e) => [e.key, e]));
    const out = GROUPS.map((g) => ({ title: t(g.title), series: series(g.keys.map((k) => byKey.get(k)).filter((e): e is CounterEntry => !!e)) }));
    const own = data.entries.filter((e) => !BUILT_IN.has(e.key));
    if (own.length) out.push({ title: t('own'), series: series(own) });
    return out.filter((c) => c.series.length > 0);
  }, [data]);

  return (
    <div>
      <div class="filters">
        <Field label={t('range')}>
          {(id) => (
            <select id={id} value={range} onChange={(e) => setRange((e.target as HTMLSelectElement).value as keyof typeof HOURS)}>
              <option value="day">{t('day')}</option>
              <option value="week">{t('week')}</option>
              <option value="month">{t('month')}</option>
            </select>
          )}
        </Field>
        <button type="button" onClick={reload}>
          {t('reload')}
        </button>
      </div>
      <ErrorBox error={error} onRetry={reload} />
      {loading && !data && <Loading />}
      {data && (
        <>
          <div class="cards">
            {charts.map((c) => (
              <TimeChart key={c.title} title={c.title} series={c.series} kind="bars" precision="hour" height={180} />
            ))}
          </div>
          <table class="totals">
            <caption>{t('totals')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('counter')}</th>
                <th scope="col">{t('total')}</th>
              </tr>
            </thead>
            <tbody>
              {data.entries.map((e) => (
                <tr key={e.key} data-key={e.key}>
                  <td>{e.name}</td>
                  <td>{formatNumber(e.total)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </div>
  );
}
