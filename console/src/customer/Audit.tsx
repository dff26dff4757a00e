// The audit log (settings find-log, AUDIT_TRAIL): who changed what, newest first, searched by object (its type
// and hashId) or by a word, a page at a time. Each change's old and new values open beside it.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { formatDate, messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { hasRight } from '../session.ts';
import { ErrorBox, Field, Loading, PageTitle, Table, TextInput, useAsync } from '../ui.tsx';
import { Pager, usePager } from './admin/parts.tsx';

interface Log {
  hashId: string;
  userHashId: string | null;
  objectType: string | null;
  objectHashId: string | null;
  action: string;
  diff: { old: unknown; new: unknown } | null;
  createdAt: string;
}

const OBJECT_TYPES = [
  'environment',
  'pinGroup',
  'pin',
  'edge',
  'grid',
  'reportType',
  'quantity',
  'pinThreshold',
  'issue',
  'machineAccount',
  'analyticsPanel',
  'exportRequest',
  'importRequest',
  'device',
  'command',
];

const t = messages(
  {
    title: 'Audit log',
    search: 'Search',
    objectType: 'Object type',
    anyType: 'any',
    objectHashId: 'Object hashId',
    word: 'Word (type, hashId or action)',
    find: 'Find',
    clear: 'Clear',
    when: 'When',
    who: 'Who',
    action: 'Action',
    object: 'Object',
    change: 'Change',
    show: 'Show',
    caption: 'Audit log entries, newest first',
    noRight: 'The audit log needs the right AUDIT_TRAIL.',
    changed: '{n} member(s)',
    before: 'Before',
    after: 'After',
    unknown: 'unknown',
    create: 'created',
    update: 'changed',
    delete: 'deleted',
  },
  {
    title: 'Auditlog',
    search: 'Zoeken',
    objectType: 'Objecttype',
    anyType: 'alle',
    objectHashId: 'hashId van het object',
    word: 'Woord (type, hashId of actie)',
    find: 'Zoeken',
    clear: 'Wissen',
    when: 'Wanneer',
    who: 'Wie',
    action: 'Actie',
    object: 'Object',
    change: 'Wijziging',
    show: 'Tonen',
    caption: 'Regels van de auditlog, nieuwste eerst',
    noRight: 'De auditlog vraagt het recht AUDIT_TRAIL.',
    changed: '{n} onderdeel/onderdelen',
    before: 'Voor',
    after: 'Na',
    unknown: 'onbekend',
    create: 'aangemaakt',
    update: 'gewijzigd',
    delete: 'verwijderd',
  },
);

const actionText = (a: string) => (a === 'create' || a === 'update' || a === 'delete' ? t(a) : a);

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The members a change touched (into objects such as an environment's settings, three deep): [path, before, after]. */
function changes(old: unknown, next: unknown, prefix = '', depth = 0): [string, unknown, unknown][] {
  const a = isObject(old) ? old : {};
  const b = isObject(next) ? next : {};
  const out: [string, unknown, unknown][] = [];
  for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])]) {
    if (JSON.stringify(a[k]) === JSON.stringify(b[k])) continue;
    if (depth < 3 && (isObject(a[k]) || a[k] == null) && (isObject(b[k]) || b[k] == null)) out.push(...changes(a[k], b[k], `${prefix}${k}.`, depth + 1));
    else out.push([`${prefix}${k}`, a[k], b[k]]);
  }
  return out;
}

/** A value as text, long ones (a logo's data URL) shortened. */
function shown(v: unknown): string {
  const text = JSON.stringify(v ?? null);
  return text.length > 160 ? `${text.slice(0, 160)}…` : text;
}

function Change({ diff }: { diff: Log['diff'] }) {
  if (!diff) return <>–</>;
  const list = changes(diff.old, diff.new);
  const keys = list.map(([k]) => k);
  return (
    <details>
      <summary>
        {keys.slice(0, 4).join(', ')}
        {keys.length > 4 ? ` … (${t('changed', { n: keys.length })})` : ''}
      </summary>
      <dl class="diff">
        {list.map(([k, before, after]) => [
          <dt key={`${k}-k`}>{k}</dt>,
          <dd key={`${k}-v`}>
            <span class="muted">{t('before')}:</span> <code>{shown(before)}</code>
            <br />
            <span class="muted">{t('after')}:</span> <code>{shown(after)}</code>
          </dd>,
        ])}
      </dl>
    </details>
  );
}

export default function Audit({ query }: PageProps) {
  const [objectType, setObjectType] = useState(query.get('objectType') ?? '');
  const [objectHashId, setObjectHashId] = useState(query.get('objectHashId') ?? '');
  const [word, setWord] = useState('');
  const [filter, setFilter] = useState({ objectType, objectHashId, word });
  const pager = usePager();
  const log = useAsync(
    (signal) =>
      api<{ rows: { log: Log; userName: string | null }[]; nextPageOffset: string | null }>('GET', '/settings/log', {
        query: {
          rowsPerPage: 25,
          descending: true,
          offset: pager.offset,
          objectType: filter.objectType || undefined,
          objectHashId: filter.objectHashId.trim() || undefined,
          search: filter.word.trim() || undefined,
        },
        signal,
      }),
    [pager.offset, filter],
  );

  const find = (e: Event) => {
    e.preventDefault();
    pager.reset();
    setFilter({ objectType, objectHashId, word });
  };
  const clear = () => {
    setObjectType('');
    setObjectHashId('');
    setWord('');
    pager.reset();
    setFilter({ objectType: '', objectHashId: '', word: '' });
  };

  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      {!hasRight('AUDIT_TRAIL') && (
        <p class="notice" role="note">
          {t('noRight')}
        </p>
      )}
      <form class="panel-box" role="search" onSubmit={find} aria-label={t('search')}>
        <div class="form-row">
          <Field label={t('objectType')}>
            {(id) => (
              <select id={id} name="objectType" value={objectType} onChange={(e) => setObjectType((e.target as HTMLSelectElement).value)}>
                <option value="">{t('anyType')}</option>
                {OBJECT_TYPES.map((o) => (
                  <option key={o} value={o}>
                    {o}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <TextInput label={t('objectHashId')} name="objectHashId" value={objectHashId} onInput={setObjectHashId} />
          <TextInput label={t('word')} name="search" type="search" value={word} onInput={setWord} />
          <div class="field button">
            <button type="submit" class="primary">
              {t('find')}
            </button>
          </div>
          <div class="field button">
            <button type="button" onClick={clear}>
              {t('clear')}
            </button>
          </div>
        </div>
      </form>
      {log.error ? (
        <ErrorBox error={log.error} onRetry={log.reload} />
      ) : !log.data ? (
        <Loading />
      ) : (
        <>
          <Table
            caption={t('caption')}
            rows={log.data.rows}
            rowKey={(r) => r.log.hashId + r.log.createdAt}
            columns={[
              { title: t('when'), cell: (r) => formatDate(r.log.createdAt) },
              { title: t('who'), cell: (r) => r.userName ?? r.log.userHashId ?? t('unknown') },
              { title: t('action'), cell: (r) => actionText(r.log.action) },
              {
                title: t('object'),
                cell: (r) => (
                  <>
                    {r.log.objectType ?? '–'} <code>{r.log.objectHashId ?? ''}</code>
                  </>
                ),
              },
              { title: t('change'), cell: (r) => <Change diff={r.log.diff} /> },
            ]}
          />
          <Pager page={pager.page} nextOffset={log.data.nextPageOffset} onNext={pager.next} onPrevious={pager.previous} />
        </>
      )}
    </section>
  );
}
