// Dashboards (analytics panel find / get, analytics results): a dashboard's cards on the SDK's six-column grid,
// each card's query answered by GET /analytics/ and drawn as its visualisation asks: a number when it answers one
// value, a time chart (uPlot) for a line or scatter over time, bars for a bar chart, a small map for a map
// (parts/MapCard.tsx, loaded only for a map card, with its rows as a table under it), else a table.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { api, findAll } from '../api.ts';
import { TimeChart, type TimeSeries } from '../charts/TimeChart.tsx';
import { formatDate, formatNumber, messages } from '../i18n.ts';
import { navigate } from '../router.ts';
import type { PageProps } from '../pages.ts';
import { environmentSetting } from '../session.ts';
import { Empty, ErrorBox, Field, Loading, PageTitle, useAsync } from '../ui.tsx';
import type { MapVisualisation } from './parts/MapCard.tsx';
import './admin/admin.css';

interface Column {
  type?: string;
  field?: string | { expression: string };
  name?: string;
  granularity?: string;
}
interface Card {
  title: string;
  subtitle?: string;
  query: { source: string; columns: Column[]; [k: string]: unknown };
  visualisation: { type: string; xAxisColumnIndex?: number | null; colors?: string[] } | MapVisualisation;
}
interface Panel {
  hashId: string;
  title: string;
  layout: { x: number; y: number; width?: number; height?: number }[];
  cards: Card[];
}

const t = messages(
  {
    title: 'Dashboards',
    dashboard: 'Dashboard',
    none: 'This environment has no dashboards yet. They are made through the API (analytics panel add).',
    noCards: 'This dashboard has no cards.',
    noRows: 'No rows.',
    more: 'More rows than shown; narrow the query to see all.',
    caption: 'Rows of {title}',
  },
  {
    title: 'Dashboards',
    dashboard: 'Dashboard',
    none: 'Deze omgeving heeft nog geen dashboards. Ze worden via de API gemaakt (analytics panel add).',
    noCards: 'Dit dashboard heeft geen kaarten.',
    noRows: 'Geen rijen.',
    more: 'Meer rijen dan getoond; verfijn de vraag om alles te zien.',
    caption: 'Rijen van {title}',
  },
);

const columnName = (c: Column, i: number): string => c.name ?? (typeof c.field === 'string' ? c.field : c.field ? c.field.expression : (c.type ?? `#${i + 1}`));
const ISO = /^\d{4}-\d\d-\d\dT/;
const timeOf = (v: unknown): number | null => (typeof v === 'string' && ISO.test(v) ? Date.parse(v) : null);
const numberOf = (v: unknown): number | null =>
  typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : null;

function cellText(v: unknown): string {
  if (v === null || v === undefined) return '–';
  if (typeof v === 'number') return formatNumber(v);
  if (typeof v === 'string') return ISO.test(v) ? formatDate(v) : v;
  if (typeof v === 'boolean') return String(v);
  return JSON.stringify(v);
}

function RowsTable({ title, names, rows }: { title: string; names: string[]; rows: unknown[][] }) {
  return (
    <table>
      <caption class="sr-only">{t('caption', { title })}</caption>
      <thead>
        <tr>
          {names.map((n, i) => (
            <th scope="col" key={i}>
              {n}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((r, i) => (
          <tr key={i}>
            {r.map((c, j) => (
              <td key={j}>{cellText(c)}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Bars({ title, labels, values }: { title: string; labels: string[]; values: number[] }) {
  const max = Math.max(...values.map(Math.abs), 0) || 1;
  return (
    <ul class="bars" aria-label={title}>
      {labels.map((l, i) => (
        <li key={i}>
          <span>{l}</span>
          <span class="bar" style={{ width: `${(Math.abs(values[i]) / max) * 100}%` }} />
          <span>{formatNumber(values[i])}</span>
        </li>
      ))}
    </ul>
  );
}

/** A map card, its module (and the map's, MapLibre with it: megabytes) loaded only for a dashboard that has one. */
function LazyMapCard({ visualisation, rows, table }: { visualisation: MapVisualisation; rows: unknown[][]; table: ComponentChildren }) {
  const module = useAsync(() => import('./parts/MapCard.tsx'), []);
  if (module.error) return <ErrorBox error={module.error} onRetry={module.reload} />;
  if (!module.data) return <Loading />;
  const { MapCard } = module.data;
  return <MapCard visualisation={visualisation} rows={rows} table={table} />;
}

/** A card's rows drawn as its visualisation asks, where the rows allow it. */
function Visual({ card, rows }: { card: Card; rows: unknown[][] }) {
  const names = card.query.columns.map(columnName);
  if (rows.length === 0) return <p class="muted">{t('noRows')}</p>;
  if (rows.length === 1 && names.length === 1 && numberOf(rows[0][0]) !== null)
    return (
      <p class="big-number" aria-label={`${card.title}: ${cellText(rows[0][0])}`}>
        {cellText(numberOf(rows[0][0]))}
      </p>
    );
  const v = card.visualisation;
  if (v.type === 'map')
    return <LazyMapCard visualisation={v as MapVisualisation} rows={rows} table={<RowsTable title={card.title} names={names} rows={rows} />} />;
  const x = ('xAxisColumnIndex' in v ? v.xAxisColumnIndex : null) ?? 0;
  const others = names.map((_, i) => i).filter((i) => i !== x && rows.some((r) => numberOf(r[i]) !== null));
  if ((v.type === 'line' || v.type === 'scatter') && others.length > 0 && rows.every((r) => timeOf(r[x]) !== null)) {
    const series: TimeSeries[] = others.map((i) => ({
      label: names[i],
      points: rows.filter((r) => numberOf(r[i]) !== null).map((r) => [timeOf(r[x])!, numberOf(r[i])!] as [number, number]),
    }));
    return <TimeChart title={card.title} series={series} />;
  }
  if ((v.type === 'stacked-bar' || v.type === 'clustered-bar') && others.length > 0) {
    return <Bars title={card.title} labels={rows.map((r) => cellText(r[x]))} values={rows.map((r) => numberOf(r[others[0]]) ?? 0)} />;
  }
  return <RowsTable title={card.title} names={names} rows={rows} />;
}

function CardView({ card, place }: { card: Card; place?: Panel['layout'][number] }) {
  const result = useAsync(
    (signal) => api<{ rows: unknown[][]; nextPageOffset: string | null }>('GET', '/analytics/', { query: { ...card.query, rowsPerPage: 100 }, signal }),
    [card],
  );
  const style = place ? { gridColumn: `${place.x + 1} / span ${Math.min(6 - place.x, place.width ?? 3)}` } : undefined;
  return (
    <article class="card" style={style}>
      <h3>{card.title}</h3>
      {card.subtitle && <p class="subtitle muted">{card.subtitle}</p>}
      {result.error ? (
        <ErrorBox error={result.error} onRetry={result.reload} />
      ) : !result.data ? (
        <Loading />
      ) : (
        <>
          <Visual card={card} rows={result.data.rows} />
          {result.data.nextPageOffset && <p class="muted">{t('more')}</p>}
        </>
      )}
    </article>
  );
}

export default function Dashboards({ query }: PageProps) {
  const panels = useAsync(
    async () => (await findAll<{ panel: { hashId: string; title: string } }>('/analytics/panel', { sortBy: 'title' }, 500)).map((r) => r.panel),
    [],
  );
  const list = panels.data ?? [];
  const wanted = query.get('panel') ?? environmentSetting<string | null>('defaultLandingPageHashId') ?? '';
  const [chosen, setChosen] = useState<string | null>(null);
  const hashId = chosen ?? (list.some((p) => p.hashId === wanted) ? wanted : (list[0]?.hashId ?? ''));
  const panel = useAsync(
    (signal) => (hashId ? api<{ panel: Panel }>('GET', `/analytics/panel/${encodeURIComponent(hashId)}`, { signal }) : Promise.resolve(null)),
    [hashId],
  );

  const choose = (h: string) => {
    setChosen(h);
    navigate(`/dashboards?panel=${encodeURIComponent(h)}`);
  };

  // cards in the layout's order (top to bottom, left to right): the grid places them, the reading order follows
  const cards = panel.data
    ? panel.data.panel.cards
        .map((card, i) => ({ card, place: panel.data!.panel.layout[i], i }))
        .sort((a, b) => (a.place?.y ?? a.i * 1000) - (b.place?.y ?? b.i * 1000) || (a.place?.x ?? 0) - (b.place?.x ?? 0))
    : [];

  return (
    <section>
      <PageTitle
        actions={
          list.length > 1 ? (
            <Field label={t('dashboard')}>
              {(id) => (
                <select id={id} name="panel" value={hashId} onChange={(e) => choose((e.target as HTMLSelectElement).value)}>
                  {list.map((p) => (
                    <option key={p.hashId} value={p.hashId}>
                      {p.title}
                    </option>
                  ))}
                </select>
              )}
            </Field>
          ) : undefined
        }
      >
        {t('title')}
      </PageTitle>
      {panel.data && <h2>{panel.data.panel.title}</h2>}
      {panels.error ? (
        <ErrorBox error={panels.error} onRetry={panels.reload} />
      ) : !panels.data ? (
        <Loading />
      ) : list.length === 0 ? (
        <Empty>{t('none')}</Empty>
      ) : panel.error ? (
        <ErrorBox error={panel.error} onRetry={panel.reload} />
      ) : !panel.data ? (
        <Loading />
      ) : cards.length === 0 ? (
        <Empty>{t('noCards')}</Empty>
      ) : (
        <div class="cards">
          {cards.map(({ card, place, i }) => (
            <CardView key={`${hashId}-${i}`} card={card} place={place} />
          ))}
        </div>
      )}
    </section>
  );
}
