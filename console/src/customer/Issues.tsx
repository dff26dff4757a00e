// Issues (/issues): the open ones by level, worst first, and on the map; a new issue appears while the page is
// open (GET /issue/stream, server-sent events), announced to screen readers too. The service filters and pages them
// (issue find's closed=false, 50 a page, more on demand: parts/issue-pages.ts); closed ones only when asked for.
import { useState } from 'preact/hooks';
import { formatDate, messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { ErrorBox, Loading, PageTitle } from '../ui.tsx';
import { MapView } from './map/MapView.tsx';
import { useIssuePages } from './parts/issue-pages.ts';
import { LevelBadge, levelName, useIssueStream } from './parts/parts.tsx';
import './parts/parts.css';

const t = messages(
  {
    title: 'Issues',
    map: 'On the map',
    none: 'No open issue.',
    showClosed: 'Show closed issues too',
    closed: 'closed {at}',
    opened: 'New issue: {title}',
    changed: 'Issue changed: {title}',
    count: '{n} open',
    countMore: 'more than {n} open',
    more: 'Show more issues',
    place: 'at {name}',
  },
  {
    title: 'Meldingen',
    map: 'Op de kaart',
    none: 'Geen open melding.',
    showClosed: 'Ook gesloten meldingen tonen',
    closed: 'gesloten {at}',
    opened: 'Nieuwe melding: {title}',
    changed: 'Melding gewijzigd: {title}',
    count: '{n} open',
    countMore: 'meer dan {n} open',
    more: 'Meer meldingen tonen',
    place: 'bij {name}',
  },
);

export default function Issues(_: PageProps) {
  const [version, setVersion] = useState(0);
  const [showClosed, setShowClosed] = useState(false);
  const [announce, setAnnounce] = useState('');
  const list = useIssuePages(showClosed ? null : false, version);
  useIssueStream((e) => {
    setAnnounce(t(e.kind === 'opened' ? 'opened' : 'changed', { title: e.issue.title }));
    setVersion((v) => v + 1);
  });
  const rows = list.rows ?? [];
  const open = rows.filter((r) => r.issue.closedAt === null).length;
  return (
    <section>
      <PageTitle actions={list.rows ? <span class="muted">{t(list.more ? 'countMore' : 'count', { n: open })}</span> : undefined}>{t('title')}</PageTitle>
      <p role="status" aria-live="polite" class={announce ? 'notice' : 'sr-only'}>
        {announce}
      </p>
      <ErrorBox error={list.error} onRetry={list.reload} />
      <label class="inline">
        <input type="checkbox" checked={showClosed} onChange={(e) => setShowClosed((e.target as HTMLInputElement).checked)} /> {t('showClosed')}
      </label>
      {list.loading && !list.rows ? <Loading /> : null}
      {list.rows && rows.length === 0 ? <p class="muted">{t('none')}</p> : null}
      {[2, 1, 0].map((level) => {
        const of = rows.filter((r) => r.issue.level === level);
        if (of.length === 0) return null;
        return (
          <div class="card level-group" key={level} data-level={level}>
            <h2>
              <LevelBadge level={level} /> <span class="sr-only">{levelName(level)}</span> <span class="muted">({of.length})</span>
            </h2>
            <ul class="issue-list">
              {of.map((r) => (
                <li key={r.issue.hashId} data-issue={r.issue.hashId}>
                  <a href={`#/issues/${r.issue.hashId}`}>{r.issue.title}</a>
                  <span class="muted">
                    {t('place', { name: r.pinGroup.name })} · {formatDate(r.issue.createdAt)}
                  </span>
                  {r.issue.closedAt ? <span class="muted">({t('closed', { at: formatDate(r.issue.closedAt) })})</span> : null}
                </li>
              ))}
            </ul>
          </div>
        );
      })}
      {list.more ? (
        <button type="button" onClick={list.loadMore} disabled={list.loading}>
          {t('more')}
        </button>
      ) : null}
      <h2>{t('map')}</h2>
      <MapView issuesOnly version={version} height="45vh" />
    </section>
  );
}
