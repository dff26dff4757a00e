// The live log: a device's or device type's (or the whole environment's) supplier activities as the worker stores
// them, over server-sent events (GET /supplier-activity/stream), newest first, each opening to its request, answer,
// parsed reports, other exec calls, log and duration. The most recent few are loaded on open (supplier activity
// find) so the log is never empty; a pause holds new entries back; at most `cap` entries are kept.
import './device.css';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, eventStream } from '../../api.ts';
import { formatDate, formatNumber, locale, messages, translated } from '../../i18n.ts';
import { ErrorBox, Loading } from '../../ui.tsx';
import { deviceName, Json } from '../parts.tsx';
import type { ActivityDetail, ActivitySummary, Device, DeviceType, SubActivity } from './types.ts';

const t = messages(
  {
    connecting: 'Connecting to the live log…',
    connected: 'Live: new activities appear as they arrive.',
    reconnecting: 'Connection lost; reconnecting…',
    closed: 'The live log is closed (the service refused or ended it).',
    reconnect: 'Reconnect',
    pause: 'Pause',
    resume: 'Resume',
    resumeHeld: 'Resume ({count} new)',
    paused: 'Paused: new activities are held back.',
    entries: 'Activities, newest first',
    none: 'No activity yet. New ones appear here as devices contact the service.',
    failed: 'failed',
    ok: 'ok',
    request: 'Request',
    answer: 'Answer',
    noAnswer: 'No answer was given.',
    reports: 'Parsed reports',
    calls: 'Other calls (exec)',
    log: 'Log',
    noLog: 'No log lines.',
    duration: 'Duration',
    ms: '{n} ms',
    device: 'Device',
    deviceType: 'Device type',
    trigger: 'Trigger',
    data: 'Event data',
    headers: 'Headers',
    body: 'Body',
    pskIdentity: 'PSK identity',
    certificate: 'Client certificate',
    reportType: 'Report type',
    payload: 'Payload',
    clear: 'Clear',
    kept: 'Keeps the newest {cap}.',
    olderLoaded: 'stored earlier',
    openDevice: 'Open the device',
  },
  {
    connecting: 'Verbinden met de live log…',
    connected: 'Live: nieuwe activiteiten verschijnen zodra ze binnenkomen.',
    reconnecting: 'Verbinding verbroken; opnieuw verbinden…',
    closed: 'De live log is gesloten (de service weigerde of beëindigde hem).',
    reconnect: 'Opnieuw verbinden',
    pause: 'Pauzeren',
    resume: 'Hervatten',
    resumeHeld: 'Hervatten ({count} nieuw)',
    paused: 'Gepauzeerd: nieuwe activiteiten worden vastgehouden.',
    entries: 'Activiteiten, nieuwste eerst',
    none: 'Nog geen activiteit. Nieuwe verschijnen hier zodra apparaten de service benaderen.',
    failed: 'mislukt',
    ok: 'ok',
    request: 'Verzoek',
    answer: 'Antwoord',
    noAnswer: 'Er is geen antwoord gegeven.',
    reports: 'Geparste rapporten',
    calls: 'Andere aanroepen (exec)',
    log: 'Log',
    noLog: 'Geen logregels.',
    duration: 'Duur',
    ms: '{n} ms',
    device: 'Apparaat',
    deviceType: 'Apparaattype',
    trigger: 'Aanleiding',
    data: 'Gegevens van de gebeurtenis',
    headers: 'Headers',
    body: 'Inhoud',
    pskIdentity: 'PSK-identiteit',
    certificate: 'Clientcertificaat',
    reportType: 'Rapporttype',
    payload: 'Payload',
    clear: 'Wissen',
    kept: 'Bewaart de nieuwste {cap}.',
    olderLoaded: 'eerder opgeslagen',
    openDevice: 'Open het apparaat',
  },
);

interface Entry {
  hashId: string;
  createdAt: string;
  triggerType: string;
  failed: boolean;
  device: Device | null;
  deviceType: DeviceType | null;
  detail?: ActivityDetail;
  /** arrived over the stream (not loaded on open) */
  live: boolean;
}

type Status = 'connecting' | 'connected' | 'reconnecting' | 'closed';

const fromDetail = (d: ActivityDetail): Entry => ({
  hashId: d.activity.hashId,
  createdAt: d.activity.createdAt,
  triggerType: d.activity.triggerType,
  failed: d.activity.failed,
  device: d.device,
  deviceType: d.deviceType,
  detail: d,
  live: true,
});
const fromSummary = (r: ActivitySummary): Entry => ({ ...r.activity, device: r.device, deviceType: r.deviceType, live: false });

/** Entries merged by hashId (a retried job may send an activity again: the newer copy wins), newest first, at most `cap`. */
export function merge(current: Entry[], incoming: Entry[], cap: number): Entry[] {
  const byId = new Map(current.map((e) => [e.hashId, e]));
  for (const e of incoming) {
    const old = byId.get(e.hashId);
    byId.set(e.hashId, old && !e.detail ? { ...e, detail: old.detail } : e);
  }
  return [...byId.values()].sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0)).slice(0, cap);
}

export interface ActivityLogProps {
  deviceHashId?: string;
  deviceTypeHashId?: string;
  /** entries kept at most */
  cap?: number;
  /** stored activities shown on open */
  initial?: number;
  /** the level of the headings inside an entry: 3 on a page of its own, 4 inside a section */
  headingLevel?: 3 | 4;
  /** hide the device column (the log of one device) */
  oneDevice?: boolean;
  /** called with each activity as it arrives (the device page reads its last contact from it) */
  onActivity?: (d: ActivityDetail) => void;
}

export function ActivityLog({ deviceHashId, deviceTypeHashId, cap = 500, initial = 20, oneDevice = false, headingLevel = 3, onActivity }: ActivityLogProps) {
  const [entries, setEntries] = useState<Entry[]>([]);
  const [held, setHeld] = useState<Entry[]>([]);
  const [paused, setPaused] = useState(false);
  const [status, setStatus] = useState<Status>('connecting');
  const [error, setError] = useState<unknown>(null);
  const [loadingInitial, setLoadingInitial] = useState(true);
  const [attempt, setAttempt] = useState(0);
  const pausedRef = useRef(paused);
  pausedRef.current = paused;
  const onActivityRef = useRef(onActivity);
  onActivityRef.current = onActivity;

  // the stored ones first, so the page is not empty
  useEffect(() => {
    const controller = new AbortController();
    setEntries([]);
    setHeld([]);
    setLoadingInitial(true);
    api<{ rows: ActivitySummary[] }>('GET', '/supplier-activity/', {
      signal: controller.signal,
      query: { deviceHashId, deviceTypeHashId, rowsPerPage: initial, sortBy: 'createdAt', descending: true },
    }).then(
      (page) => {
        setEntries((current) => merge(current, page.rows.map(fromSummary), cap));
        setLoadingInitial(false);
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        setError(err);
        setLoadingInitial(false);
      },
    );
    return () => controller.abort();
  }, [deviceHashId, deviceTypeHashId, initial, cap]);

  // then the stream
  useEffect(() => {
    setStatus('connecting');
    const source = eventStream('/supplier-activity/stream', { deviceHashId, deviceTypeHashId });
    source.onopen = () => setStatus('connected');
    source.onerror = () => setStatus(source.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting');
    source.addEventListener('activity', (event) => {
      let detail: ActivityDetail;
      try {
        detail = JSON.parse((event as MessageEvent<string>).data) as ActivityDetail;
      } catch {
        return;
      }
      onActivityRef.current?.(detail);
      const entry = fromDetail(detail);
      if (pausedRef.current) setHeld((h) => merge(h, [entry], cap));
      else setEntries((current) => merge(current, [entry], cap));
    });
    return () => source.close();
  }, [deviceHashId, deviceTypeHashId, attempt, cap]);

  const resume = () => {
    setEntries((current) => merge(current, held, cap));
    setHeld([]);
    setPaused(false);
  };

  return (
    <div class="live-log">
      <div class="live-bar">
        <p role="status" aria-live="polite" class={`live-status live-${status}`}>
          <span class="dot" aria-hidden="true" />
          {paused && status === 'connected' ? t('paused') : t(status)}
        </p>
        <div class="live-actions">
          {status === 'closed' && (
            <button type="button" onClick={() => setAttempt((n) => n + 1)}>
              {t('reconnect')}
            </button>
          )}
          {paused ? (
            <button type="button" class="primary" onClick={resume}>
              {held.length ? t('resumeHeld', { count: held.length }) : t('resume')}
            </button>
          ) : (
            <button type="button" onClick={() => setPaused(true)} aria-pressed="false">
              {t('pause')}
            </button>
          )}
          <button
            type="button"
            onClick={() => {
              setEntries([]);
              setHeld([]);
            }}
          >
            {t('clear')}
          </button>
        </div>
      </div>
      <p class="muted small">{t('kept', { cap: formatNumber(cap) })}</p>
      <ErrorBox error={error} />
      {loadingInitial && entries.length === 0 && <Loading />}
      {!loadingInitial && entries.length === 0 && <p class="muted">{t('none')}</p>}
      {entries.length > 0 && (
        <ol class="live-list" aria-label={t('entries')}>
          {entries.map((e) => (
            <li key={e.hashId}>
              <EntryView entry={e} oneDevice={oneDevice} level={headingLevel} />
            </li>
          ))}
        </ol>
      )}
    </div>
  );
}

function timeOf(iso: string): string {
  const d = new Date(iso);
  const tag = locale.value === 'nl' ? 'nl-NL' : 'en-GB';
  const time = d.toLocaleTimeString(tag, { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  const ms = String(d.getMilliseconds()).padStart(3, '0');
  return new Date().toDateString() === d.toDateString() ? `${time}.${ms}` : `${d.toLocaleDateString(tag)} ${time}`;
}

function EntryView({ entry, oneDevice, level }: { entry: Entry; oneDevice: boolean; level: 3 | 4 }) {
  const [open, setOpen] = useState(false);
  const request = entry.detail?.activity.triggerData.request;
  const status = request?.response?.statusCode;
  return (
    <details
      class={`live-entry${entry.failed ? ' failed' : ''}`}
      onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}
      data-activity={entry.hashId}
    >
      <summary>
        <span class="live-time">{timeOf(entry.createdAt)}</span>
        <span class={entry.failed ? 'badge bad' : 'badge ok'}>{entry.failed ? t('failed') : t('ok')}</span>
        <span class="live-trigger">{entry.triggerType}</span>
        {request && (
          <span class="mono live-path">
            {request.request.method.toUpperCase()} {request.request.url.path}
            {status !== undefined ? ` → ${status}` : ''}
          </span>
        )}
        {!oneDevice && entry.device && <span class="live-device">{deviceName(entry.device)}</span>}
        {entry.deviceType && <span class="muted live-type">{translated(entry.deviceType.name)}</span>}
        {entry.detail?.durationMs !== undefined && <span class="muted live-duration">{t('ms', { n: formatNumber(entry.detail.durationMs) })}</span>}
        {!entry.live && <span class="muted live-older">({t('olderLoaded')})</span>}
      </summary>
      {open && <EntryBody entry={entry} level={level} />}
    </details>
  );
}

/** What an entry holds; an entry loaded on open is fetched in full when it is first opened. */
function EntryBody({ entry, level }: { entry: Entry; level: 3 | 4 }) {
  const H = level === 3 ? 'h3' : 'h4';
  const [detail, setDetail] = useState<ActivityDetail | undefined>(entry.detail);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (detail) return;
    const controller = new AbortController();
    api<ActivityDetail>('GET', `/supplier-activity/${encodeURIComponent(entry.hashId)}`, { signal: controller.signal }).then(
      setDetail,
      (err: unknown) => controller.signal.aborted || setError(err),
    );
    return () => controller.abort();
  }, [entry.hashId]);
  if (error) return <ErrorBox error={error} />;
  if (!detail) return <Loading />;
  const a = detail.activity;
  const request = a.triggerData.request;
  const reports = a.activities.filter((s) => s.triggerType === 'parseReport');
  const calls = a.activities.filter((s) => s.triggerType !== 'parseReport');
  const { request: _request, ...eventData } = a.triggerData;
  return (
    <div class="live-body">
      <dl>
        <dt>{t('trigger')}</dt>
        <dd>{a.triggerType}</dd>
        <dt>{t('duration')}</dt>
        <dd>{detail.durationMs !== undefined ? t('ms', { n: formatNumber(detail.durationMs) }) : '–'}</dd>
        {detail.device && (
          <>
            <dt>{t('device')}</dt>
            <dd>
              <a href={`#/devices/${detail.device.hashId}`}>{deviceName(detail.device)}</a> <code>{detail.device.hashId}</code>
            </dd>
          </>
        )}
        {detail.deviceType && (
          <>
            <dt>{t('deviceType')}</dt>
            <dd>{translated(detail.deviceType.name)}</dd>
          </>
        )}
        <dt>Id</dt>
        <dd>
          <code>{a.hashId}</code> · {formatDate(a.createdAt)}
        </dd>
      </dl>
      {request ? (
        <div class="grid-2">
          <div>
            <H>{t('request')}</H>
            <p class="mono">
              {request.request.method.toUpperCase()} {request.request.url.protocol}://{request.request.url.host}
              {request.request.url.path}
              {queryText(request.request.url.query)}
            </p>
            {request.request.pskIdentityHint && (
              <p>
                {t('pskIdentity')}: <code>{request.request.pskIdentityHint}</code>
              </p>
            )}
            {request.request.certificate ? (
              <>
                <p>{t('certificate')}</p>
                <Json value={request.request.certificate} />
              </>
            ) : null}
            <details>
              <summary>{t('headers')}</summary>
              <Json value={request.request.headers} />
            </details>
            {request.request.body && (
              <>
                <p>
                  {t('body')} ({request.request.body.type})
                </p>
                <Json value={request.request.body.data} />
              </>
            )}
          </div>
          <div>
            <H>{t('answer')}</H>
            {request.response ? (
              <>
                <p class={request.response.statusCode >= 400 ? 'bad' : undefined}>{request.response.statusCode}</p>
                <details>
                  <summary>{t('headers')}</summary>
                  <Json value={request.response.headers} />
                </details>
                {request.response.body && (
                  <>
                    <p>
                      {t('body')} ({request.response.body.type})
                    </p>
                    <Json value={request.response.body.data} />
                  </>
                )}
              </>
            ) : (
              <p class="muted">{t('noAnswer')}</p>
            )}
          </div>
        </div>
      ) : (
        Object.keys(eventData).length > 0 && (
          <>
            <H>{t('data')}</H>
            <Json value={eventData} />
          </>
        )
      )}
      {reports.length > 0 && (
        <>
          <H>{t('reports')}</H>
          {reports.map((r) => (
            <SubView key={r.hashId} sub={r} report />
          ))}
        </>
      )}
      {calls.length > 0 && (
        <>
          <H>{t('calls')}</H>
          {calls.map((c) => (
            <SubView key={c.hashId} sub={c} />
          ))}
        </>
      )}
      <H>{t('log')}</H>
      <LogLines lines={a.log} />
    </div>
  );
}

function SubView({ sub, report = false }: { sub: SubActivity; report?: boolean }) {
  const reportType = report ? (sub.triggerData.reportType as { hashId?: string; name?: unknown } | undefined) : undefined;
  const { reportType: _rt, payload, ...rest } = sub.triggerData;
  return (
    <div class={`live-sub${sub.failed ? ' failed' : ''}`}>
      <p>
        <span class={sub.failed ? 'badge bad' : 'badge ok'}>{sub.failed ? t('failed') : t('ok')}</span> <strong>{sub.triggerType}</strong>
        {reportType && (
          <>
            {' '}
            · {t('reportType')}: {translated(reportType.name)} <code>{reportType.hashId}</code>
          </>
        )}
      </p>
      {report && payload !== undefined && (
        <>
          <p class="small">{t('payload')}</p>
          <Json value={payload} />
        </>
      )}
      {report ? Object.keys(rest).length > 0 && <Json value={rest} /> : <Json value={sub.triggerData} />}
      {sub.log.length > 0 && <LogLines lines={sub.log} />}
    </div>
  );
}

function LogLines({ lines }: { lines: { type: 'log' | 'error'; message: string }[] }) {
  if (lines.length === 0) return <p class="muted">{t('noLog')}</p>;
  return (
    <ul class="log-lines">
      {lines.map((l, i) => (
        <li key={i} class={l.type === 'error' ? 'bad' : undefined}>
          <span class="sr-only">{l.type}: </span>
          <span class="mono">{l.message}</span>
        </li>
      ))}
    </ul>
  );
}

function queryText(query: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(query ?? {})) for (const x of [v].flat()) parts.push(`${k}=${String(x)}`);
  return parts.length ? `?${parts.join('&')}` : '';
}
