// Exports (settings add-export / find-export-request, EXPORT): a period's measurements (or the static data) as a
// CSV, written by a worker; the page follows each export's progress and offers the file once it is available. The
// download stays on this origin: a link the API answers for another host is named, not followed.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { formatDate, messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { hasRight } from '../session.ts';
import { ErrorBox, Field, Loading, PageTitle, Table, useAsync } from '../ui.tsx';
import { Pager, sameOriginPath, usePager } from './admin/parts.tsx';

interface ExportRequest {
  hashId: string;
  content: { type: string; from?: string; to?: string; staticOnly?: boolean };
  delimiter: string;
  rowDelimiter: string;
  status: 'waiting' | 'creating' | 'available' | 'deleted';
  downloadUrl?: string;
  progress: number;
  createdAt: string;
  error?: string;
}

const t = messages(
  {
    title: 'Exports',
    request: 'Request an export',
    from: 'From',
    to: 'To',
    staticOnly: 'Static data only (pin groups and pins, no measurements)',
    delimiter: 'Separator',
    comma: 'Comma (,)',
    semicolon: 'Semicolon (;)',
    rowDelimiter: 'Line ending',
    lf: 'LF (Unix, macOS)',
    crlf: 'CRLF (Windows, Excel)',
    submit: 'Request export',
    requested: 'Export requested; it appears below and is written in the background.',
    recent: 'Exports',
    created: 'Requested',
    content: 'Content',
    status: 'Status',
    progress: 'Progress',
    file: 'File',
    download: 'Download CSV',
    waiting: 'waiting',
    creating: 'being written',
    available: 'available',
    deleted: 'gone',
    all: 'measurements {from} – {to}',
    static: 'static data',
    other: '{type}',
    foreign: 'The link points to another host ({host}); the console only downloads from this one.',
    noRight: 'Exports need the right EXPORT.',
    badPeriod: 'The end must come after the start.',
    caption: 'Exports of this environment, newest first',
  },
  {
    title: 'Exports',
    request: 'Een export aanvragen',
    from: 'Van',
    to: 'Tot',
    staticOnly: 'Alleen statische gegevens (locaties en poorten, geen metingen)',
    delimiter: 'Scheidingsteken',
    comma: 'Komma (,)',
    semicolon: 'Puntkomma (;)',
    rowDelimiter: 'Regeleinde',
    lf: 'LF (Unix, macOS)',
    crlf: 'CRLF (Windows, Excel)',
    submit: 'Export aanvragen',
    requested: 'Export aangevraagd; hij staat hieronder en wordt op de achtergrond geschreven.',
    recent: 'Exports',
    created: 'Aangevraagd',
    content: 'Inhoud',
    status: 'Status',
    progress: 'Voortgang',
    file: 'Bestand',
    download: 'CSV downloaden',
    waiting: 'wacht',
    creating: 'wordt geschreven',
    available: 'beschikbaar',
    deleted: 'weg',
    all: 'metingen {from} – {to}',
    static: 'statische gegevens',
    other: '{type}',
    foreign: 'De link wijst naar een andere host ({host}); de console downloadt alleen van deze.',
    noRight: 'Exports vragen het recht EXPORT.',
    badPeriod: 'Het einde moet na het begin liggen.',
    caption: 'Exports van deze omgeving, nieuwste eerst',
  },
);

/** A datetime-local input's value for a time (local clock, minutes). */
const localInput = (d: Date) => new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);

function describe(x: ExportRequest): string {
  if (x.content.type === 'all') return x.content.staticOnly ? t('static') : t('all', { from: formatDate(x.content.from), to: formatDate(x.content.to) });
  return t('other', { type: x.content.type });
}

function DownloadLink({ url, hashId }: { url: string; hashId: string }) {
  const local = sameOriginPath(url);
  if (!local) {
    let host = url;
    try {
      host = new URL(url).host;
    } catch {
      /* shown as given */
    }
    return <span class="warn">{t('foreign', { host })}</span>;
  }
  return (
    <a href={local} download={`export-${hashId}.csv`}>
      {t('download')}
    </a>
  );
}

export default function Exports(_: PageProps) {
  const now = new Date();
  const [from, setFrom] = useState(localInput(new Date(now.getTime() - 30 * 86_400_000)));
  const [to, setTo] = useState(localInput(new Date(now.getTime() + 60_000)));
  const [staticOnly, setStaticOnly] = useState(false);
  const [delimiter, setDelimiter] = useState<',' | ';'>(',');
  const [rowDelimiter, setRowDelimiter] = useState<'\n' | '\r\n'>('\n');
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const pager = usePager();
  const list = useAsync(
    (signal) =>
      api<{ rows: { exportRequest: ExportRequest }[]; nextPageOffset: string | null }>('GET', '/settings/export', {
        query: { sortBy: 'createdAt', descending: true, rowsPerPage: 20, offset: pager.offset },
        signal,
      }),
    [pager.offset],
  );

  // while an export is being written, ask again every second
  const busy = (list.data?.rows ?? []).some((r) => r.exportRequest.status === 'waiting' || r.exportRequest.status === 'creating');
  useEffect(() => {
    if (!busy) return;
    const timer = setTimeout(list.reload, 1000);
    return () => clearTimeout(timer);
  }, [busy, list.data]);

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setNotice(null);
    const fromDate = new Date(from);
    const toDate = new Date(to);
    if (!(toDate > fromDate)) return setError(new Error(t('badPeriod')));
    try {
      await api('POST', '/settings/export', {
        body: { content: { type: 'all', staticOnly, gridHashId: null, from: fromDate.toISOString(), to: toDate.toISOString() }, delimiter, rowDelimiter },
      });
      setNotice(t('requested'));
      pager.reset();
      list.reload();
    } catch (err) {
      setError(err);
    }
  };

  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      {!hasRight('EXPORT') && (
        <p class="notice" role="note">
          {t('noRight')}
        </p>
      )}
      <form class="panel-box" onSubmit={submit} aria-labelledby="export-request">
        <h2 id="export-request">{t('request')}</h2>
        <div class="form-row">
          <Field label={t('from')}>
            {(id) => <input id={id} name="from" type="datetime-local" required value={from} onInput={(e) => setFrom((e.target as HTMLInputElement).value)} />}
          </Field>
          <Field label={t('to')}>
            {(id) => <input id={id} name="to" type="datetime-local" required value={to} onInput={(e) => setTo((e.target as HTMLInputElement).value)} />}
          </Field>
          <Field label={t('delimiter')}>
            {(id) => (
              <select id={id} name="delimiter" value={delimiter} onChange={(e) => setDelimiter((e.target as HTMLSelectElement).value as ',' | ';')}>
                <option value=",">{t('comma')}</option>
                <option value=";">{t('semicolon')}</option>
              </select>
            )}
          </Field>
          <Field label={t('rowDelimiter')}>
            {(id) => (
              <select
                id={id}
                name="rowDelimiter"
                value={rowDelimiter === '\n' ? 'lf' : 'crlf'}
                onChange={(e) => setRowDelimiter((e.target as HTMLSelectElement).value === 'lf' ? '\n' : '\r\n')}
              >
                <option value="lf">{t('lf')}</option>
                <option value="crlf">{t('crlf')}</option>
              </select>
            )}
          </Field>
        </div>
        <div class="field check">
          <label>
            <input type="checkbox" name="staticOnly" checked={staticOnly} onChange={(e) => setStaticOnly((e.target as HTMLInputElement).checked)} />{' '}
            {t('staticOnly')}
          </label>
        </div>
        <ErrorBox error={error} />
        {notice && (
          <p class="ok" role="status">
            {notice}
          </p>
        )}
        <button type="submit" class="primary">
          {t('submit')}
        </button>
      </form>

      <h2>{t('recent')}</h2>
      {list.error ? (
        <ErrorBox error={list.error} onRetry={list.reload} />
      ) : !list.data ? (
        <Loading />
      ) : (
        <>
          <Table
            caption={t('caption')}
            rows={list.data.rows.map((r) => r.exportRequest)}
            rowKey={(x) => x.hashId}
            columns={[
              { title: t('created'), cell: (x) => formatDate(x.createdAt) },
              { title: t('content'), cell: (x) => describe(x) },
              {
                title: t('status'),
                cell: (x) => (
                  <span class={x.status === 'available' ? 'ok' : x.status === 'deleted' ? 'bad' : undefined}>
                    {t(x.status)}
                    {x.error ? `: ${x.error}` : ''}
                  </span>
                ),
              },
              {
                title: t('progress'),
                cell: (x) => (
                  <progress max={1} value={x.progress} aria-label={`${t('progress')} ${Math.round(x.progress * 100)}%`}>
                    {Math.round(x.progress * 100)}%
                  </progress>
                ),
              },
              { title: t('file'), cell: (x) => (x.status === 'available' && x.downloadUrl ? <DownloadLink url={x.downloadUrl} hashId={x.hashId} /> : '–') },
            ]}
          />
          <Pager page={pager.page} nextOffset={list.data.nextPageOffset} onNext={pager.next} onPrevious={pager.previous} />
        </>
      )}
    </section>
  );
}
