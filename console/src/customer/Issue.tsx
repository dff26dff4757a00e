// An issue (/issues/:hashId): what it is about, its history (opened, what its trigger saw, comments, closed), and
// what a customer does with it: comment, close or reopen, subscribe to its mails. Follows the live issue stream.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { formatDate, formatNumber, messages, translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { hasRight } from '../session.ts';
import { ErrorBox, Field, Loading, PageTitle, useAsync } from '../ui.tsx';
import { LevelBadge, useIssueStream, valueOf, type Issue as IssueModel, type PinGroup, type Quantity, type ValuePair } from './parts/parts.tsx';
import './parts/parts.css';

const t = messages(
  {
    title: 'Issue',
    about: 'About',
    place: 'Pin group',
    pins: 'Pins',
    quantities: 'Quantities',
    level: 'Level',
    opened: 'Opened',
    by: 'Opened by',
    system: 'the service',
    closedAt: 'Closed',
    open: 'open',
    history: 'History',
    trigger: 'Last seen by its trigger',
    lastValue: 'Last value',
    crossings: 'Crossings',
    measurements: 'Measurements',
    comments: 'Comments',
    noComments: 'No comments yet.',
    comment: 'Comment',
    send: 'Add comment',
    sendClose: 'Comment and close',
    close: 'Close issue',
    reopen: 'Reopen issue',
    subscribe: 'Mail me about this issue',
    subscribed: 'You get mails about this issue.',
    unsubscribe: 'Stop mails',
    closedNow: 'The issue is closed.',
    reopened: 'The issue is open again.',
    missing: 'Device not reporting',
    thresholds: 'Threshold crossed',
  },
  {
    title: 'Melding',
    about: 'Over',
    place: 'Locatie',
    pins: 'Poorten',
    quantities: 'Grootheden',
    level: 'Niveau',
    opened: 'Geopend',
    by: 'Geopend door',
    system: 'de service',
    closedAt: 'Gesloten',
    open: 'open',
    history: 'Verloop',
    trigger: 'Laatst gezien door de trigger',
    lastValue: 'Laatste waarde',
    crossings: 'Overschrijdingen',
    measurements: 'Metingen',
    comments: 'Reacties',
    noComments: 'Nog geen reacties.',
    comment: 'Reactie',
    send: 'Reactie plaatsen',
    sendClose: 'Reageren en sluiten',
    close: 'Melding sluiten',
    reopen: 'Melding heropenen',
    subscribe: 'Mail mij over deze melding',
    subscribed: 'Je krijgt mails over deze melding.',
    unsubscribe: 'Geen mails meer',
    closedNow: 'De melding is gesloten.',
    reopened: 'De melding is weer open.',
    missing: 'Apparaat rapporteert niet',
    thresholds: 'Grenswaarde overschreden',
  },
);

interface IssueGet {
  issue: IssueModel;
  userName: string | null;
  pinGroup: PinGroup;
  pins: { hashId: string; name: string }[];
  quantities: Quantity[];
  comments: { comment: { hashId: string; comment: string; createdAt: string; userHashId: string | null }; userName: string | null }[];
  subscribed: boolean;
  automation: { type: 'missing' | 'thresholds' } | null;
  trigger: { type: string; lastValue: ValuePair | null; lastMeasuredAt: string | null; crossingCount: number; measurementCount: number } | null;
}

export default function Issue({ params }: PageProps) {
  const { hashId } = params;
  const [tick, setTick] = useState(0);
  const data = useAsync((signal) => api<IssueGet>('GET', `/issue/${encodeURIComponent(hashId)}`, { signal }), [hashId, tick]);
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState('');
  useIssueStream((e) => {
    if (e.issue.hashId === hashId) setTick((n) => n + 1);
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
  const d = data.data;
  const closed = d.issue.closedAt !== null;
  const canAct = hasRight('ISSUES');
  const act = async (fn: () => Promise<unknown>, message = '') => {
    setBusy(true);
    setError(null);
    try {
      await fn();
      setDone(message);
      setTick((n) => n + 1);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const comment = (closeIssue: boolean) =>
    act(
      async () => {
        await api('POST', `/issue/${hashId}/comment`, { body: { comment: text, closeIssue } });
        setText('');
      },
      closeIssue ? t('closedNow') : '',
    );
  return (
    <section>
      <PageTitle actions={<LevelBadge level={d.issue.level} />}>{d.issue.title}</PageTitle>
      {done ? (
        <p role="status" class="notice">
          {done}
        </p>
      ) : null}
      <ErrorBox error={error} />
      <div class="pg-grid">
        <div class="card" aria-labelledby="issue-about">
          <h2 id="issue-about">{t('about')}</h2>
          <dl class="facts">
            <div>
              <dt>{t('place')}</dt>
              <dd>
                <a href={`#/pin-groups/${d.pinGroup.hashId}`}>{d.pinGroup.name}</a>
              </dd>
            </div>
            {d.pins.length > 0 ? (
              <div>
                <dt>{t('pins')}</dt>
                <dd>{d.pins.map((p) => p.name).join(', ')}</dd>
              </div>
            ) : null}
            {d.quantities.length > 0 ? (
              <div>
                <dt>{t('quantities')}</dt>
                <dd>{d.quantities.map((q) => translated(q.name)).join(', ')}</dd>
              </div>
            ) : null}
            {d.automation ? (
              <div>
                <dt>{t('opened')}</dt>
                <dd>{d.automation.type === 'missing' ? t('missing') : t('thresholds')}</dd>
              </div>
            ) : null}
            <div>
              <dt>{t('by')}</dt>
              <dd>{d.userName ?? t('system')}</dd>
            </div>
            <div>
              <dt>{t('closedAt')}</dt>
              <dd class="issue-state">{closed ? formatDate(d.issue.closedAt) : t('open')}</dd>
            </div>
          </dl>
          {canAct ? (
            <div class="actions">
              {closed ? (
                <button type="button" disabled={busy} onClick={() => act(() => api('POST', `/issue/${hashId}`, { body: { closed: false } }), t('reopened'))}>
                  {t('reopen')}
                </button>
              ) : (
                <button type="button" disabled={busy} onClick={() => act(() => api('POST', `/issue/${hashId}`, { body: { closed: true } }), t('closedNow'))}>
                  {t('close')}
                </button>
              )}
            </div>
          ) : null}
          <div class="actions">
            <label class="inline">
              <input
                type="checkbox"
                checked={d.subscribed}
                disabled={busy}
                onChange={(e) => {
                  const on = (e.target as HTMLInputElement).checked;
                  void act(() => api('POST', `/issue/${hashId}/notifications`, { body: { subscribed: on } }));
                }}
              />{' '}
              {t('subscribe')}
            </label>
          </div>
        </div>
        <div class="card" aria-labelledby="issue-history">
          <h2 id="issue-history">{t('history')}</h2>
          <dl class="facts">
            <div>
              <dt>{t('opened')}</dt>
              <dd>{formatDate(d.issue.startAt)}</dd>
            </div>
            {d.trigger ? (
              <>
                <div>
                  <dt>{t('lastValue')}</dt>
                  <dd>
                    {d.trigger.lastValue ? formatNumber(valueOf(d.trigger.lastValue)!) : '–'}{' '}
                    {d.trigger.lastMeasuredAt ? <span class="muted">({formatDate(d.trigger.lastMeasuredAt)})</span> : null}
                  </dd>
                </div>
                <div>
                  <dt>{t('crossings')}</dt>
                  <dd>
                    {formatNumber(d.trigger.crossingCount)} / {formatNumber(d.trigger.measurementCount)} {t('measurements').toLowerCase()}
                  </dd>
                </div>
              </>
            ) : null}
            {closed ? (
              <div>
                <dt>{t('closedAt')}</dt>
                <dd>{formatDate(d.issue.closedAt)}</dd>
              </div>
            ) : null}
          </dl>
        </div>
      </div>
      <div class="card" aria-labelledby="issue-comments">
        <h2 id="issue-comments">{t('comments')}</h2>
        {d.comments.length === 0 ? (
          <p class="muted">{t('noComments')}</p>
        ) : (
          <ol class="comments">
            {d.comments.map((c) => (
              <li key={c.comment.hashId}>
                <span class="who">
                  {c.userName ?? t('system')} · {formatDate(c.comment.createdAt)}
                </span>
                <p>{c.comment.comment}</p>
              </li>
            ))}
          </ol>
        )}
        {canAct ? (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void comment(false);
            }}
          >
            <Field label={t('comment')}>
              {(id) => <textarea id={id} name="comment" value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />}
            </Field>
            <div class="actions">
              <button type="submit" class="primary" disabled={busy || text.trim() === ''}>
                {t('send')}
              </button>
              {!closed ? (
                <button type="button" disabled={busy || text.trim() === ''} onClick={() => void comment(true)}>
                  {t('sendClose')}
                </button>
              ) : null}
            </div>
          </form>
        ) : null}
      </div>
    </section>
  );
}
