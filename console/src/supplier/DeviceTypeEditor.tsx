// A device type's event handler in the editor: tried on a stored request of its devices or on a typed-in event
// (POST /device-type/:hashId/dry-run with the editor's text), then, before it is saved, replayed on the type's last
// stored requests with the saved handler and with the edited one (POST /device-type/:hashId/compare), and the
// differences shown side by side.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { formatDate, messages, translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { ErrorBox, Loading, PageTitle, TextInput, useAsync } from '../ui.tsx';
import { CodeEditor } from './code/CodeEditor.tsx';
import { Json, LogLines, markersOf, MeasurementTable, RunFailure, RunOutcome, t as common, type LogLine, type RunCommon } from './code/parts.tsx';

const t = messages(
  {
    back: 'Back to device types',
    handler: 'Event handler of {name}',
    tryOn: 'Try it on',
    stored: 'a stored request',
    typed: 'an event I type',
    activity: 'Stored request',
    noActivity: "This type's devices have sent nothing yet: type an event instead.",
    event: 'Event (as args.event receives it, JSON)',
    badJson: 'The event is not JSON: {message}',
    answer: 'Answer to the device',
    noAnswer: 'No answer: the event is not a device request.',
    status: 'Status {status}',
    reports: 'Reports',
    commands: 'Commands',
    otherCalls: 'Other calls',
    none: 'None.',
    reportOf: 'Report of {reportType}',
    review: 'Review changes',
    reviewing: 'Replaying…',
    compareTitle: 'Changes against stored requests',
    compareHint: "The type's last stored requests, each run with the saved handler and with the one in the editor. Nothing is stored or sent.",
    total: 'requests replayed',
    differing: 'answer differently',
    newlyFailing: 'fail only with the change',
    fixed: 'fail only without it',
    noRuns: 'No stored request to replay: nothing to compare.',
    current: 'Saved handler',
    proposed: 'Handler in the editor',
    same: 'same result',
    differs: 'differs:',
    dAnswer: 'answer',
    dReports: 'reports',
    dMeasurements: 'measurements',
    dFailed: 'failure',
    staleCompare: "The code changed since this comparison: review again to see the change's effect.",
    saveAnyway: 'Save',
    saveReviewed: 'Save this handler',
    deviceOf: 'device {device}',
    mustCompile: 'The comparison needs code that compiles:',
  },
  {
    back: 'Terug naar apparaattypes',
    handler: 'Event handler van {name}',
    tryOn: 'Probeer op',
    stored: 'een opgeslagen verzoek',
    typed: 'een event dat ik typ',
    activity: 'Opgeslagen verzoek',
    noActivity: 'De apparaten van dit type stuurden nog niets: typ een event.',
    event: 'Event (zoals args.event het krijgt, JSON)',
    badJson: 'Het event is geen JSON: {message}',
    answer: 'Antwoord aan het apparaat',
    noAnswer: 'Geen antwoord: het event is geen verzoek van een apparaat.',
    status: 'Status {status}',
    reports: 'Rapporten',
    commands: "Commando's",
    otherCalls: 'Andere aanroepen',
    none: 'Geen.',
    reportOf: 'Rapport van {reportType}',
    review: 'Wijzigingen bekijken',
    reviewing: 'Opnieuw afspelen…',
    compareTitle: 'Wijzigingen op opgeslagen verzoeken',
    compareHint:
      'De laatste opgeslagen verzoeken van het type, elk uitgevoerd met de opgeslagen handler en met die in de editor. Er wordt niets opgeslagen of verstuurd.',
    total: 'verzoeken afgespeeld',
    differing: 'antwoorden anders',
    newlyFailing: 'falen alleen met de wijziging',
    fixed: 'falen alleen zonder',
    noRuns: 'Geen opgeslagen verzoek om af te spelen: niets te vergelijken.',
    current: 'Opgeslagen handler',
    proposed: 'Handler in de editor',
    same: 'zelfde resultaat',
    differs: 'verschilt:',
    dAnswer: 'antwoord',
    dReports: 'rapporten',
    dMeasurements: 'metingen',
    dFailed: 'fout',
    staleCompare: 'De code veranderde na deze vergelijking: bekijk opnieuw om het effect te zien.',
    saveAnyway: 'Opslaan',
    saveReviewed: 'Deze handler opslaan',
    deviceOf: 'apparaat {device}',
    mustCompile: 'De vergelijking vraagt code die compileert:',
  },
);

interface Call {
  name: string;
  failed: boolean;
  log: LogLine[];
  triggerData: unknown;
}
interface DryRun extends RunCommon {
  answer: { statusCode: number; headers: Record<string, string>; body: unknown } | null;
  calls: Call[];
}
interface CompareAnswer {
  runs: {
    activityHashId: string;
    deviceHashId: string | null;
    createdAt: string;
    current: DryRun;
    proposed: DryRun;
    differs: { answer: boolean; reports: boolean; measurements: boolean; failed: boolean };
  }[];
  summary: { total: number; differing: number; newlyFailing: number; fixed: number };
}
interface ActivityRow {
  activity: { hashId: string; createdAt: string; triggerType: string; failed: boolean };
  device: { hashId: string; supplierDeviceIdentifier?: string } | null;
}

const SAMPLE_EVENT = JSON.stringify(
  {
    type: 'incomingRequest',
    webRequest: {
      url: { protocol: 'https', host: 'devices.example', path: '/', query: {} },
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: { type: 'json', data: { temperature: 21.5 } },
      ip: '203.0.113.10',
      certificate: null,
    },
  },
  null,
  2,
);

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A parseReport call's measurements, from its triggerData's observations. */
function measurementsOf(call: Call) {
  const data = isObject(call.triggerData) ? call.triggerData : {};
  const observations = Array.isArray(data.observations) ? data.observations : [];
  return observations.filter(isObject).map((o) => {
    const m = (isObject(o.measurement) ? o.measurement : {}) as Obj;
    const q = isObject(o.quantity) ? o.quantity : {};
    return {
      channelIndex: Number(m.channelIndex),
      quantityHashId: String(q.hashId ?? m.quantityHashId ?? ''),
      generatedAt: String(m.generatedAt ?? ''),
      orderOfMagnitude: Number(m.orderOfMagnitude),
      significand: Number(m.significand),
    };
  });
}

function reportTypeOf(call: Call): string {
  const data = isObject(call.triggerData) ? call.triggerData : {};
  const type = isObject(data.reportType) ? data.reportType : {};
  return type.name ? `${translated(type.name)} (${String(type.hashId)})` : String(type.hashId ?? data.reportTypeHashId ?? '?');
}

function AnswerView({ run }: { run: DryRun }) {
  if (!run.answer) return <p class="muted">{t('noAnswer')}</p>;
  return (
    <>
      <p>{t('status', { status: run.answer.statusCode })}</p>
      {run.answer.body !== null && run.answer.body !== undefined && <Json value={run.answer.body} />}
    </>
  );
}

function ReportsView({ run, compact }: { run: DryRun; compact?: boolean }) {
  const reports = run.calls.filter((c) => c.name === 'parseReport');
  if (reports.length === 0) return <p class="muted">{t('none')}</p>;
  return (
    <>
      {reports.map((c, i) => (
        <div key={i} class="report">
          <p>
            {t('reportOf', { reportType: reportTypeOf(c) })}
            {c.failed && <span class="tag bad">{common('failed')}</span>}
          </p>
          <MeasurementTable rows={measurementsOf(c)} caption={common('measurements')} />
          {!compact && c.log.length > 0 && <LogLines log={c.log} />}
        </div>
      ))}
    </>
  );
}

/** A device-type dry run: the answer, the reports and their measurements, commands and other exec calls, the log. */
function DryRunView({ run }: { run: DryRun }) {
  const commands = run.calls.filter((c) => /command/i.test(c.name));
  const others = run.calls.filter((c) => c.name !== 'parseReport' && !/command/i.test(c.name));
  return (
    <RunOutcome run={run}>
      <h3>{t('answer')}</h3>
      <AnswerView run={run} />
      <h3>{t('reports')}</h3>
      <ReportsView run={run} />
      <h3>{t('commands')}</h3>
      {commands.length === 0 ? (
        <p class="muted">{t('none')}</p>
      ) : (
        <ul>
          {commands.map((c, i) => (
            <li key={i}>
              <code>{c.name}</code>
              {c.failed && <span class="tag bad">{common('failed')}</span>}
              <Json value={c.triggerData} />
            </li>
          ))}
        </ul>
      )}
      {others.length > 0 && (
        <>
          <h3>{t('otherCalls')}</h3>
          <ul>
            {others.map((c, i) => (
              <li key={i}>
                <code>{c.name}</code>
                {c.failed && <span class="tag bad">{common('failed')}</span>}
                <Json value={c.triggerData} />
              </li>
            ))}
          </ul>
        </>
      )}
    </RunOutcome>
  );
}

/** One side of a compared request: failure, answer, measurements. */
function Side({ title, run }: { title: string; run: DryRun }) {
  return (
    <div class="side">
      <h3>{title}</h3>
      <p class={run.failed ? 'bad' : 'ok'}>{run.failed ? common('failed') : common('succeeded')}</p>
      <RunFailure error={run.error} />
      <AnswerView run={run} />
      <h4>{t('reports')}</h4>
      <ReportsView run={run} compact />
    </div>
  );
}

function CompareView({ answer, stale, onSave, saving }: { answer: CompareAnswer; stale: boolean; onSave: () => void; saving: boolean }) {
  const s = answer.summary;
  return (
    <section class="panel compare" aria-labelledby="compare-title">
      <h2 id="compare-title">{t('compareTitle')}</h2>
      <p class="muted small">{t('compareHint')}</p>
      <div role="status">
        <ul class="summary">
          <li data-summary="total">
            <strong>{s.total}</strong>
            {t('total')}
          </li>
          <li data-summary="differing" class={s.differing ? 'warn' : undefined}>
            <strong>{s.differing}</strong>
            {t('differing')}
          </li>
          <li data-summary="newlyFailing" class={s.newlyFailing ? 'bad' : undefined}>
            <strong>{s.newlyFailing}</strong>
            {t('newlyFailing')}
          </li>
          <li data-summary="fixed" class={s.fixed ? 'ok' : undefined}>
            <strong>{s.fixed}</strong>
            {t('fixed')}
          </li>
        </ul>
      </div>
      {stale && (
        <p class="warn" role="alert">
          {t('staleCompare')}
        </p>
      )}
      {answer.runs.length === 0 && <p class="muted">{t('noRuns')}</p>}
      {answer.runs.map((r) => {
        const which = (['answer', 'reports', 'measurements', 'failed'] as const).filter((k) => r.differs[k]);
        const label = { answer: t('dAnswer'), reports: t('dReports'), measurements: t('dMeasurements'), failed: t('dFailed') };
        return (
          <details key={r.activityHashId} class="compare-run" data-differs={which.length > 0 ? 'true' : 'false'} open={which.length > 0}>
            <summary>
              {formatDate(r.createdAt)} · {t('deviceOf', { device: r.deviceHashId ?? '–' })} ·{' '}
              {which.length === 0 ? (
                <span class="muted">{t('same')}</span>
              ) : (
                <span class="warn">
                  {t('differs')}{' '}
                  {which.map((k) => (
                    <span key={k} class="tag">
                      {label[k]}
                    </span>
                  ))}
                </span>
              )}
            </summary>
            <div class="grid-2">
              <Side title={t('current')} run={r.current} />
              <Side title={t('proposed')} run={r.proposed} />
            </div>
          </details>
        );
      })}
      <div class="row">
        <button type="button" class="primary" onClick={onSave} disabled={saving}>
          {saving ? common('saving') : t('saveReviewed')}
        </button>
      </div>
    </section>
  );
}

export default function DeviceTypeEditor({ params }: PageProps) {
  const hashId = params.hashId;
  const loaded = useAsync(
    (signal) => api<{ deviceType: { hashId: string; name: unknown }; eventHandler: string }>('GET', `/device-type/${hashId}`, { signal }),
    [hashId],
  );
  const activities = useAsync(
    (signal) =>
      api<{ rows: ActivityRow[] }>('GET', '/supplier-activity/', { signal, query: { deviceTypeHashId: hashId, rowsPerPage: 25, descending: true } }).then(
        (a) => a.rows,
      ),
    [hashId],
  );
  const [name, setName] = useState('');
  const [code, setCode] = useState('');
  const [saved, setSaved] = useState<{ name: string; code: string } | null>(null);
  const [mode, setMode] = useState<'stored' | 'typed'>('stored');
  const [activityHashId, setActivityHashId] = useState('');
  const [eventText, setEventText] = useState(SAMPLE_EVENT);
  const [running, setRunning] = useState(false);
  const [run, setRun] = useState<DryRun | null>(null);
  const [runError, setRunError] = useState<unknown>(null);
  const [comparing, setComparing] = useState(false);
  const [compare, setCompare] = useState<{ code: string; answer: CompareAnswer } | null>(null);
  const [compareError, setCompareError] = useState<unknown>(null);
  const [saving, setSaving] = useState(false);
  const [saveError, setSaveError] = useState<unknown>(null);
  const [justSaved, setJustSaved] = useState(false);

  useEffect(() => {
    if (!loaded.data) return;
    const v = { name: translated(loaded.data.deviceType.name), code: loaded.data.eventHandler };
    setName(v.name);
    setCode(v.code);
    setSaved(v);
  }, [loaded.data]);
  useEffect(() => {
    if (activities.data && activities.data.length === 0) setMode('typed');
    if (activities.data?.length && !activityHashId) setActivityHashId(activities.data[0].activity.hashId);
  }, [activities.data]);

  const dirty = saved !== null && (saved.name !== name || saved.code !== code);

  const tryIt = async (e: Event) => {
    e.preventDefault();
    setRunError(null);
    let target: Record<string, unknown>;
    if (mode === 'stored' && activityHashId) target = { activityHashId };
    else {
      try {
        target = { event: JSON.parse(eventText) };
      } catch (err) {
        setRunError(new Error(t('badJson', { message: err instanceof Error ? err.message : String(err) })));
        return;
      }
    }
    setRunning(true);
    try {
      setRun(await api<DryRun>('POST', `/device-type/${hashId}/dry-run`, { body: { ...target, eventHandler: code } }));
    } catch (err) {
      setRun(null);
      setRunError(err);
    } finally {
      setRunning(false);
    }
  };

  const review = async () => {
    setComparing(true);
    setCompareError(null);
    const proposed = code;
    try {
      setCompare({ code: proposed, answer: await api<CompareAnswer>('POST', `/device-type/${hashId}/compare`, { body: { eventHandler: proposed } }) });
    } catch (err) {
      setCompare(null);
      setCompareError(err);
    } finally {
      setComparing(false);
    }
  };

  const save = async () => {
    setSaving(true);
    setSaveError(null);
    setJustSaved(false);
    try {
      await api('POST', `/device-type/${hashId}`, { body: { ...(saved?.name !== name ? { name } : {}), eventHandler: code } });
      setSaved({ name, code });
      setCompare(null);
      setJustSaved(true);
    } catch (err) {
      setSaveError(err);
    } finally {
      setSaving(false);
    }
  };

  if (loaded.error)
    return (
      <section>
        <PageTitle>{hashId}</PageTitle>
        <ErrorBox error={loaded.error} onRetry={loaded.reload} />
        <p>
          <a href="#/device-types">{t('back')}</a>
        </p>
      </section>
    );
  if (!loaded.data || saved === null) return <Loading />;
  return (
    <section>
      <PageTitle actions={<a href="#/device-types">{t('back')}</a>}>{saved.name || hashId}</PageTitle>
      <div class="workbench">
        <div>
          <TextInput label={common('name')} value={name} onInput={setName} required name="name" />
          <CodeEditor
            kind="eventHandler"
            value={code}
            onChange={setCode}
            label={t('handler', { name: saved.name || hashId })}
            markers={markersOf(run?.error)}
          />
          <div class="row">
            <button type="button" onClick={review} disabled={comparing} aria-controls="compare-area">
              {comparing ? t('reviewing') : t('review')}
            </button>
            <button type="button" class={compare ? undefined : 'primary'} onClick={save} disabled={saving || !dirty}>
              {saving ? common('saving') : t('saveAnyway')}
            </button>
            {dirty && <span class="warn">{common('unsaved')}</span>}
            {justSaved && !dirty && (
              <span class="ok" role="status">
                {common('saved')}
              </span>
            )}
          </div>
          <ErrorBox error={saveError} />
        </div>
        <form class="panel try" onSubmit={tryIt} aria-labelledby="try-title">
          <h2 id="try-title">{common('tryTitle')}</h2>
          <p class="muted small">{common('nothingChanged')}</p>
          <fieldset class="choice">
            <legend>{t('tryOn')}</legend>
            <label class="inline">
              <input
                type="radio"
                name="try-mode"
                value="stored"
                checked={mode === 'stored'}
                onChange={() => setMode('stored')}
                disabled={!activities.data?.length}
              />{' '}
              {t('stored')}
            </label>{' '}
            <label class="inline">
              <input type="radio" name="try-mode" value="typed" checked={mode === 'typed'} onChange={() => setMode('typed')} /> {t('typed')}
            </label>
          </fieldset>
          <ErrorBox error={activities.error} onRetry={activities.reload} />
          {mode === 'stored' && activities.data && activities.data.length > 0 && (
            <div class="field">
              <label for="try-activity">{t('activity')}</label>
              <select id="try-activity" value={activityHashId} onChange={(e) => setActivityHashId((e.target as HTMLSelectElement).value)}>
                {activities.data.map((a) => (
                  <option key={a.activity.hashId} value={a.activity.hashId}>
                    {formatDate(a.activity.createdAt)} · {a.device?.supplierDeviceIdentifier ?? a.device?.hashId ?? '–'} · {a.activity.triggerType}
                    {a.activity.failed ? ` · ${common('failed')}` : ''}
                  </option>
                ))}
              </select>
            </div>
          )}
          {mode === 'stored' && activities.data?.length === 0 && <p class="muted">{t('noActivity')}</p>}
          {mode === 'typed' && (
            <div class="field">
              <label for="try-event">{t('event')}</label>
              <textarea
                id="try-event"
                class="mono"
                rows={12}
                value={eventText}
                spellcheck={false}
                onInput={(e) => setEventText((e.target as HTMLTextAreaElement).value)}
              />
            </div>
          )}
          <button type="submit" class="primary" disabled={running}>
            {running ? common('running') : common('run')}
          </button>
          <ErrorBox error={runError} />
          {run && (
            <div class="result" aria-live="polite">
              <h3>{common('result')}</h3>
              <DryRunView run={run} />
            </div>
          )}
        </form>
      </div>
      <div id="compare-area">
        <ErrorBox error={compareError} />
        {compare && <CompareView answer={compare.answer} stale={compare.code !== code} onSave={save} saving={saving} />}
      </div>
    </section>
  );
}
