// A pin group (/pin-groups/:hashId): its fields as the environment's field configuration renders them (editable with
// the right STATIC), its pins with their latest measurement, the linked device and its last contact, thresholds,
// and its chart panel's charts over the environment's defaultGraphRange. The charts read GET /chart/ (the service
// reduces a long range to min/max per bucket: no page waits for a year of raw rows); zoom and pan ask it again for
// the new range. While the range ends now, the charts are read again every few seconds, so a new measurement
// shows without a reload; an issue event (GET /issue/stream) on this pin group reloads the page's data.
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api } from '../api.ts';
import type { TimeSeries } from '../charts/TimeChart.tsx';
import { FieldForm, problems, type FieldConfiguration, type FieldValues } from '../forms/FieldForm.tsx';
import { formatDate, formatNumber, messages, translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { environmentSetting, hasRight } from '../session.ts';
import { ErrorBox, Loading, PageTitle, Table, useAskAgain, useAsync } from '../ui.tsx';
import { LevelBadge, useIssueStream, valueOf, type Pin, type PinGroup as PinGroupModel, type Quantity, type ValuePair } from './parts/parts.tsx';
import { Chart as ChartView, type ThresholdLine } from './parts/Chart.tsx';
import './parts/parts.css';

const t = messages(
  {
    title: 'Pin group',
    fields: 'Fields',
    edit: 'Edit',
    save: 'Save',
    cancel: 'Cancel',
    saved: 'Saved.',
    pins: 'Pins',
    pin: 'Pin',
    latest: 'Latest measurement',
    at: 'At',
    device: 'Linked device',
    noDevice: 'No device is linked.',
    link: 'Link a device',
    lastContact: 'Last contact',
    nextReport: 'Next report before',
    never: 'never',
    thresholds: 'Thresholds',
    quantity: 'Quantity',
    critLow: 'Critically low',
    low: 'Low',
    high: 'High',
    critHigh: 'Critically high',
    noThresholds: "No thresholds of its own (the quantities' defaults apply).",
    charts: 'Charts',
    noCharts: 'No measurements to chart yet.',
    range: 'Period',
    earlier: 'Earlier',
    later: 'Later',
    zoomIn: 'Zoom in',
    zoomOut: 'Zoom out',
    now: 'Up to now',
    reduced: '{points} measurements shown as the lowest and highest of each of {buckets} periods.',
    issues: 'Open issues',
    noIssues: 'No open issue.',
    live: 'Follows new measurements',
    level: 'Worst open issue',
  },
  {
    title: 'Locatie',
    fields: 'Velden',
    edit: 'Bewerken',
    save: 'Opslaan',
    cancel: 'Annuleren',
    saved: 'Opgeslagen.',
    pins: 'Poorten',
    pin: 'Poort',
    latest: 'Laatste meting',
    at: 'Op',
    device: 'Gekoppeld apparaat',
    noDevice: 'Er is geen apparaat gekoppeld.',
    link: 'Apparaat koppelen',
    lastContact: 'Laatste contact',
    nextReport: 'Volgend rapport voor',
    never: 'nooit',
    thresholds: 'Grenswaarden',
    quantity: 'Grootheid',
    critLow: 'Kritiek laag',
    low: 'Laag',
    high: 'Hoog',
    critHigh: 'Kritiek hoog',
    noThresholds: 'Geen eigen grenswaarden (die van de grootheden gelden).',
    charts: 'Grafieken',
    noCharts: 'Nog geen metingen om te tonen.',
    range: 'Periode',
    earlier: 'Eerder',
    later: 'Later',
    zoomIn: 'Inzoomen',
    zoomOut: 'Uitzoomen',
    now: 'Tot nu',
    reduced: '{points} metingen getoond als de laagste en hoogste van elk van {buckets} perioden.',
    issues: 'Open meldingen',
    noIssues: 'Geen open melding.',
    live: 'Volgt nieuwe metingen',
    level: 'Ergste open melding',
  },
);

interface PinGroupGet {
  pinGroup: PinGroupModel;
  pins: { pin: Pin }[];
  device: { hashId: string; userFacingIdentifier: string; lastOnlineAt: string | null; nextReportBefore: string | null } | null;
  deviceType: { name: string } | null;
  thresholds: {
    value: {
      hashId: string;
      pinHashId: string;
      criticallyLow: ValuePair | null;
      low: ValuePair | null;
      high: ValuePair | null;
      criticallyHigh: ValuePair | null;
    };
    quantity: Quantity;
  }[];
}
interface Limits {
  criticallyLow: ValuePair | null;
  low: ValuePair | null;
  high: ValuePair | null;
  criticallyHigh: ValuePair | null;
}
interface ChartDef {
  title: unknown;
  series: { quantity: Quantity; pin: Pin; color: string | null; pinThreshold: Limits | null }[];
}
interface Panel {
  lastMode: 'manual' | 'automatic';
  charts: { automatic: ChartDef[]; manual: ChartDef[] };
}
interface SeriesAnswer {
  series: {
    pinHashId: string;
    quantityHashId: string;
    measurements: { generatedAt: string; significand: number; orderOfMagnitude: number }[];
    reduction: { pointCount: number; bucketCount: number } | null;
  }[];
}
interface MeasurementRow {
  report: {
    generatedAt: string;
    pinObservations: { measurement: { significand: number; orderOfMagnitude: number; pinHashId: string }; quantityHashId: string }[];
  } | null;
  pin: { hashId: string };
}

const UNIT_MS: Record<string, number> = {
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 7 * 86_400_000,
  month: 30 * 86_400_000,
  year: 365 * 86_400_000,
};

/** The environment's defaultGraphRange ("1 month", "7 days") in milliseconds; a month when it cannot be read. */
export function rangeMs(text: string | undefined): number {
  const m = /(\d+(?:\.\d+)?)\s*(minute|hour|day|week|month|year)s?/i.exec(text ?? '');
  return m ? Number(m[1]) * UNIT_MS[m[2].toLowerCase()] : UNIT_MS.month;
}

const POLL_MS = 4000;

export default function PinGroup({ params }: PageProps) {
  const { hashId } = params;
  const [tick, setTick] = useState(0);
  // the device's last contact and the pins' levels move on their own: read again now and then
  const [fresh, setFresh] = useState(0);
  const data = useAsync((signal) => api<PinGroupGet>('GET', `/graph/pin-group/${encodeURIComponent(hashId)}`, { signal }), [hashId, tick, fresh]);
  useAskAgain(
    POLL_MS * 3,
    data.loading,
    useCallback(() => setFresh((n) => n + 1), []),
  );
  useIssueStream((e) => {
    if (e.issue.pinGroupHashId === hashId) setTick((n) => n + 1);
  });
  if (data.loading && !data.data)
    return (
      <section>
        <PageTitle>{t('title')}</PageTitle>
        <Loading />
      </section>
    );
  if (!data.data)
    return (
      <section>
        <PageTitle>{t('title')}</PageTitle>
        <ErrorBox error={data.error} onRetry={data.reload} />
      </section>
    );
  const g = data.data;
  return (
    <section class="pin-group">
      <PageTitle
        actions={
          <span aria-label={t('level')}>
            <LevelBadge level={g.pinGroup.level} place />
          </span>
        }
      >
        {g.pinGroup.name}
      </PageTitle>
      <ErrorBox error={data.error} onRetry={data.reload} />
      <div class="pg-grid">
        <Fields pinGroup={g.pinGroup} onSaved={() => setTick((n) => n + 1)} />
        <DevicePanel g={g} />
      </div>
      <OpenIssues hashId={hashId} tick={tick} />
      <Charts hashId={hashId} tick={tick} />
      <Pins g={g} tick={tick} />
      <Thresholds g={g} />
    </section>
  );
}

function Fields({ pinGroup, onSaved }: { pinGroup: PinGroupModel; onSaved: () => void }) {
  const configurations = environmentSetting<{ pinGroups?: FieldConfiguration[] }>('fieldConfigurations')?.pinGroups ?? [];
  const [editing, setEditing] = useState<FieldValues | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const canEdit = hasRight('STATIC');
  const save = async (e: Event) => {
    e.preventDefault();
    if (!editing) return;
    setError(null);
    try {
      await api('POST', `/graph/pin-group/${pinGroup.hashId}`, { body: { fields: editing } });
      setEditing(null);
      setSaved(true);
      onSaved();
    } catch (err) {
      setError(err);
    }
  };
  const invalid = editing ? Object.keys(problems(configurations, editing)).length > 0 : false;
  return (
    <div class="card" aria-labelledby="pg-fields">
      <h2 id="pg-fields">{t('fields')}</h2>
      {editing ? (
        <form onSubmit={save}>
          <FieldForm configurations={configurations} values={editing} onChange={setEditing} />
          <ErrorBox error={error} />
          <div class="actions">
            <button type="submit" class="primary" disabled={invalid}>
              {t('save')}
            </button>
            <button
              type="button"
              onClick={() => {
                setEditing(null);
                setError(null);
              }}
            >
              {t('cancel')}
            </button>
          </div>
        </form>
      ) : (
        <>
          <FieldForm configurations={configurations} values={pinGroup.fields} readOnly />
          {saved ? (
            <p role="status" class="muted">
              {t('saved')}
            </p>
          ) : null}
          {canEdit ? (
            <button
              type="button"
              onClick={() => {
                setSaved(false);
                setEditing({ ...pinGroup.fields });
              }}
            >
              {t('edit')}
            </button>
          ) : null}
        </>
      )}
    </div>
  );
}

function DevicePanel({ g }: { g: PinGroupGet }) {
  return (
    <div class="card" aria-labelledby="pg-device">
      <h2 id="pg-device">{t('device')}</h2>
      {g.device ? (
        <dl class="facts">
          <div>
            <dt>{t('device')}</dt>
            <dd>
              {g.device.userFacingIdentifier}
              {g.deviceType ? ` (${g.deviceType.name})` : ''}
            </dd>
          </div>
          <div>
            <dt>{t('lastContact')}</dt>
            <dd class="last-contact">{g.device.lastOnlineAt ? formatDate(g.device.lastOnlineAt) : t('never')}</dd>
          </div>
          <div>
            <dt>{t('nextReport')}</dt>
            <dd>{formatDate(g.device.nextReportBefore)}</dd>
          </div>
        </dl>
      ) : (
        <>
          <p class="muted">{t('noDevice')}</p>
          {hasRight('SENSORS') ? <a href={`#/claim?pinGroupHashId=${g.pinGroup.hashId}`}>{t('link')}</a> : null}
        </>
      )}
    </div>
  );
}

function OpenIssues({ hashId, tick }: { hashId: string; tick: number }) {
  const issues = useAsync(
    (signal) =>
      api<{ rows: { issue: { hashId: string; title: string; level: number; closedAt: string | null; createdAt: string } }[] }>('GET', '/issue/', {
        query: { pinGroupHashId: hashId, sortBy: 'createdAt', descending: true, rowsPerPage: 50 },
        signal,
      }),
    [hashId, tick],
  );
  const open = (issues.data?.rows ?? []).filter((r) => r.issue.closedAt === null);
  return (
    <div class="card" aria-labelledby="pg-issues">
      <h2 id="pg-issues">{t('issues')}</h2>
      <ErrorBox error={issues.error} onRetry={issues.reload} />
      {issues.data && open.length === 0 ? <p class="muted">{t('noIssues')}</p> : null}
      <ul class="issue-list">
        {open.map((r) => (
          <li key={r.issue.hashId}>
            <LevelBadge level={r.issue.level} /> <a href={`#/issues/${r.issue.hashId}`}>{r.issue.title}</a>{' '}
            <span class="muted">{formatDate(r.issue.createdAt)}</span>
          </li>
        ))}
      </ul>
    </div>
  );
}

function Charts({ hashId, tick }: { hashId: string; tick: number }) {
  const span0 = rangeMs(environmentSetting<string>('defaultGraphRange'));
  // the range shown; `follow`: its end is now, and it moves along with time
  const [view, setView] = useState<{ span: number; end: number; follow: boolean }>(() => ({ span: span0, end: Date.now(), follow: true }));
  const [poll, setPoll] = useState(0);
  // a panel without charts yet (nothing measured on its pins) is asked again with each poll: the first measurement makes its chart
  // (the poll it was last asked at, kept once it has charts: a panel that gets its charts is not asked again for that)
  const emptyPanel = useRef(true);
  const panelPoll = useRef(0);
  if (emptyPanel.current) panelPoll.current = poll;
  const panel = useAsync((signal) => api<Panel>('GET', '/chart/panel', { query: { pinGroupHashId: hashId }, signal }), [hashId, tick, panelPoll.current]);
  const charts = panel.data
    ? panel.data.lastMode === 'manual' && panel.data.charts.manual.length > 0
      ? panel.data.charts.manual
      : panel.data.charts.automatic
    : [];
  emptyPanel.current = charts.length === 0;
  const refs = useMemo(() => charts.flatMap((c) => c.series.map((s) => ({ pinHashId: s.pin.hashId, quantityHashId: s.quantity.hashId }))), [panel.data]);
  const end = view.follow ? Date.now() + 60_000 : view.end;
  const start = end - view.span;
  const series = useAsync(
    async (signal) =>
      refs.length === 0
        ? ({ series: [] } as SeriesAnswer)
        : api<SeriesAnswer>('GET', '/chart/', { query: { startAt: new Date(start).toISOString(), endAt: new Date(end).toISOString(), series: refs }, signal }),
    [refs, view, poll],
  );
  // a new measurement shows without a reload: read the range again a few seconds after each answer while it ends now
  useAskAgain(
    POLL_MS,
    series.loading,
    useCallback(() => setPoll((n) => n + 1), []),
    view.follow,
  );
  const [last, setLast] = useState<SeriesAnswer | undefined>(undefined);
  useEffect(() => {
    if (series.data) setLast(series.data);
  }, [series.data]);
  const shown = series.data ?? last;
  const move = (by: number) =>
    setView((v) => {
      const e = (v.follow ? Date.now() : v.end) + by * v.span;
      return { span: v.span, end: Math.min(e, Date.now()), follow: e >= Date.now() };
    });
  const zoom = (factor: number) =>
    setView((v) => {
      const e = v.follow ? Date.now() : v.end;
      const mid = e - v.span / 2;
      const span = Math.max(60_000, Math.min(v.span * factor, 20 * UNIT_MS.year));
      const newEnd = Math.min(mid + span / 2, Date.now());
      return { span, end: newEnd, follow: v.follow && factor < 1 ? true : newEnd >= Date.now() - 1000 };
    });
  return (
    <div class="card" aria-labelledby="pg-charts">
      <h2 id="pg-charts">{t('charts')}</h2>
      <div class="chart-tools" role="group" aria-label={t('range')}>
        <span class="range-text">
          {formatDate(new Date(start).toISOString())} – {view.follow ? t('now') : formatDate(new Date(end).toISOString())}
        </span>
        <button type="button" onClick={() => move(-0.5)}>
          {t('earlier')}
        </button>
        <button type="button" onClick={() => move(0.5)} disabled={view.follow}>
          {t('later')}
        </button>
        <button type="button" onClick={() => zoom(0.5)}>
          {t('zoomIn')}
        </button>
        <button type="button" onClick={() => zoom(2)}>
          {t('zoomOut')}
        </button>
        <button type="button" onClick={() => setView({ span: span0, end: Date.now(), follow: true })} disabled={view.follow && view.span === span0}>
          {t('now')}
        </button>
        {view.follow ? <span class="muted live-badge">{t('live')}</span> : null}
      </div>
      <ErrorBox
        error={panel.error ?? series.error}
        onRetry={() => {
          panel.reload();
          series.reload();
        }}
      />
      {panel.loading && !panel.data ? <Loading /> : null}
      {panel.data && charts.length === 0 ? <p class="muted">{t('noCharts')}</p> : null}
      {shown &&
        charts.map((c, ci) => {
          let offset = 0;
          for (let i = 0; i < ci; i++) offset += charts[i].series.length;
          const data: TimeSeries[] = c.series.map((s, si) => {
            const answer = shown.series[offset + si];
            const unit = s.quantity.unit ? ` (${s.quantity.unit})` : '';
            return {
              label: `${translated(s.quantity.name)} · ${s.pin.name}${unit}`,
              points: (answer?.measurements ?? []).map((m) => [Date.parse(m.generatedAt), m.significand * 10 ** m.orderOfMagnitude] as [number, number]),
            };
          });
          const reduced = c.series.map((_, si) => shown.series[offset + si]?.reduction).find((r) => r);
          const title =
            translated(c.title) ||
            c.series
              .map((s) => translated(s.quantity.name))
              .filter((v, i, a) => a.indexOf(v) === i)
              .join(', ');
          const count = data.reduce((n, s) => n + s.points.length, 0);
          // each series' limits: the pin's own, else its quantity's defaults
          const lines: ThresholdLine[] = c.series.flatMap((s) => {
            const q = s.quantity;
            const l: Limits = s.pinThreshold ?? {
              criticallyLow: q.defaultCriticallyLowThreshold ?? null,
              low: q.defaultLowThreshold ?? null,
              high: q.defaultHighThreshold ?? null,
              criticallyHigh: q.defaultCriticallyHighThreshold ?? null,
            };
            const named = c.series.length > 1 ? ` · ${s.pin.name}` : '';
            return (
              [
                ['criticallyLow', t('critLow'), true],
                ['low', t('low'), false],
                ['high', t('high'), false],
                ['criticallyHigh', t('critHigh'), true],
              ] as const
            ).flatMap(([key, label, critical]) => {
              const v = valueOf(l[key]);
              return v === null ? [] : [{ label: `${label}${named}`, value: v, critical }];
            });
          });
          return (
            <figure key={ci} class="pg-chart" data-points={count}>
              <ChartView
                title={title}
                series={data}
                range={[start, end]}
                thresholds={lines}
                onZoom={(from, to) => setView({ span: Math.max(60_000, to - from), end: Math.min(to, Date.now()), follow: to >= Date.now() - 1000 })}
              />
              {reduced ? (
                <figcaption class="muted">{t('reduced', { points: formatNumber(reduced.pointCount), buckets: formatNumber(reduced.bucketCount) })}</figcaption>
              ) : null}
            </figure>
          );
        })}
    </div>
  );
}

function Pins({ g, tick }: { g: PinGroupGet; tick: number }) {
  const [poll, setPoll] = useState(0);
  const latest = useAsync(
    (signal) =>
      api<{ rows: MeasurementRow[] }>('GET', '/measurement/', {
        query: { pinGroupHashIds: [g.pinGroup.hashId], sortBy: 'generatedAt', descending: true, rowsPerPage: 100, includePinsWithoutReports: false },
        signal,
      }),
    [g.pinGroup.hashId, tick, poll],
  );
  useAskAgain(
    POLL_MS * 2,
    latest.loading,
    useCallback(() => setPoll((n) => n + 1), []),
  );
  const byPin = new Map<string, { at: string; values: { quantityHashId: string; value: number }[] }>();
  for (const r of latest.data?.rows ?? []) {
    if (!r.report || byPin.has(r.pin.hashId)) continue;
    byPin.set(r.pin.hashId, {
      at: r.report.generatedAt,
      values: r.report.pinObservations.map((o) => ({
        quantityHashId: o.quantityHashId,
        value: o.measurement.significand * 10 ** o.measurement.orderOfMagnitude,
      })),
    });
  }
  const quantities = new Map(g.thresholds.map((th) => [th.quantity.hashId, th.quantity]));
  return (
    <div class="card" aria-labelledby="pg-pins">
      <h2 id="pg-pins">{t('pins')}</h2>
      <Table
        caption={t('pins')}
        rows={g.pins.map((p) => p.pin)}
        rowKey={(p) => p.hashId}
        columns={[
          {
            title: t('pin'),
            cell: (p) => (
              <>
                {p.name} <LevelBadge level={p.level} place />
              </>
            ),
          },
          {
            title: t('latest'),
            cell: (p) => {
              const l = byPin.get(p.hashId);
              if (!l) return <span class="muted">–</span>;
              return (
                <span class="latest-value">
                  {l.values
                    .map((v) => `${formatNumber(v.value)}${quantities.get(v.quantityHashId)?.unit ? ` ${quantities.get(v.quantityHashId)!.unit}` : ''}`)
                    .join(', ')}
                </span>
              );
            },
          },
          { title: t('at'), cell: (p) => formatDate(byPin.get(p.hashId)?.at) },
        ]}
      />
    </div>
  );
}

function Thresholds({ g }: { g: PinGroupGet }) {
  const pinName = new Map(g.pins.map((p) => [p.pin.hashId, p.pin.name]));
  const fmt = (v: ValuePair | null) => {
    const n = valueOf(v);
    return n === null ? '–' : formatNumber(n);
  };
  return (
    <div class="card" aria-labelledby="pg-thresholds">
      <h2 id="pg-thresholds">{t('thresholds')}</h2>
      {g.thresholds.length === 0 ? (
        <p class="muted">{t('noThresholds')}</p>
      ) : (
        <Table
          caption={t('thresholds')}
          rows={g.thresholds}
          rowKey={(r) => r.value.hashId}
          columns={[
            { title: t('pin'), cell: (r) => pinName.get(r.value.pinHashId) ?? r.value.pinHashId },
            { title: t('quantity'), cell: (r) => `${translated(r.quantity.name)}${r.quantity.unit ? ` (${r.quantity.unit})` : ''}` },
            { title: t('critLow'), cell: (r) => fmt(r.value.criticallyLow) },
            { title: t('low'), cell: (r) => fmt(r.value.low) },
            { title: t('high'), cell: (r) => fmt(r.value.high) },
            { title: t('critHigh'), cell: (r) => fmt(r.value.criticallyHigh) },
          ]}
        />
      )}
    </div>
  );
}
