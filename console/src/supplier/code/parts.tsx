// What the code pages share: a dry run's failure, log and calls as text, the starter code of each kind, the list of
// a kind's resources with its create form, and the editor page of a parser or identifier with its Try panel.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api } from '../../api.ts';
import { formatDate, messages, translated } from '../../i18n.ts';
import { navigate } from '../../router.ts';
import { ErrorBox, Loading, PageTitle, Table, TextInput, useAsync } from '../../ui.tsx';
import { CodeEditor, type CodeKind, type CodeMarker } from './CodeEditor.tsx';

export const t = messages(
  {
    name: 'Name',
    id: 'Id',
    created: 'Created',
    create: 'Create',
    creating: 'Creating…',
    newOne: 'New',
    code: 'Code',
    save: 'Save',
    saving: 'Saving…',
    saved: 'Saved.',
    unsaved: 'Unsaved changes',
    tryTitle: 'Try',
    run: 'Run',
    running: 'Running…',
    result: 'Result',
    failed: 'Failed',
    succeeded: 'Ran without failing',
    log: 'Log',
    noLog: 'No log lines.',
    errorAt: '{kind} at line {line}, column {column}: {message}',
    errorNoPlace: '{kind}: {message}',
    back: 'Back to the list',
    nothingChanged: 'Dry runs store, change and send nothing.',
    starterHint: 'A starter the editor checks against the typings; change it on the next page.',
    deviceType: 'Device type (for the starter code)',
    none: '(none)',
    payload: 'Payload (as exec.parseReport passes it)',
    report: 'Report',
    measurements: 'Measurements',
    channel: 'Channel',
    quantity: 'Quantity',
    value: 'Value',
    generatedAt: 'Generated at',
    fields: 'Fields',
    noReport: 'No report: the parser failed.',
    device: 'Device',
    newDevice: 'a new device would be created',
    existingDevice: 'existing device {hashId}',
    noResult: 'No device named: the identifier failed.',
    requestBody: 'Request body (JSON or text)',
    method: 'Method',
    path: 'Path',
    url: 'Webhook URL',
    urlHint: "Third parties post here; the secret in it is the webhook's.",
    cn: "Common name (CN) of the device's certificate",
    org: 'Organisation (O)',
    serial: 'Serial number (serialNumber)',
    csr: 'Certificate signing request (PEM) of your intermediate CA',
    certificate: 'Certificate',
    editorLabel: 'Code of {name}',
    identifies: 'Identifies device {identifier} of device type {deviceType}',
  },
  {
    name: 'Naam',
    id: 'Id',
    created: 'Gemaakt',
    create: 'Maken',
    creating: 'Maken…',
    newOne: 'Nieuw',
    code: 'Code',
    save: 'Opslaan',
    saving: 'Opslaan…',
    saved: 'Opgeslagen.',
    unsaved: 'Niet opgeslagen wijzigingen',
    tryTitle: 'Proberen',
    run: 'Uitvoeren',
    running: 'Bezig…',
    result: 'Resultaat',
    failed: 'Mislukt',
    succeeded: 'Uitgevoerd zonder fout',
    log: 'Log',
    noLog: 'Geen logregels.',
    errorAt: '{kind} op regel {line}, kolom {column}: {message}',
    errorNoPlace: '{kind}: {message}',
    back: 'Terug naar de lijst',
    nothingChanged: 'Een proefrun slaat niets op, wijzigt niets en verstuurt niets.',
    starterHint: 'Een begin dat de editor tegen de typings controleert; pas het aan op de volgende pagina.',
    deviceType: 'Apparaattype (voor de begincode)',
    none: '(geen)',
    payload: 'Payload (zoals exec.parseReport die doorgeeft)',
    report: 'Rapport',
    measurements: 'Metingen',
    channel: 'Kanaal',
    quantity: 'Grootheid',
    value: 'Waarde',
    generatedAt: 'Gemeten op',
    fields: 'Velden',
    noReport: 'Geen rapport: de parser faalde.',
    device: 'Apparaat',
    newDevice: 'er zou een nieuw apparaat gemaakt worden',
    existingDevice: 'bestaand apparaat {hashId}',
    noResult: 'Geen apparaat genoemd: de identifier faalde.',
    requestBody: 'Body van het verzoek (JSON of tekst)',
    method: 'Methode',
    path: 'Pad',
    url: 'Webhook-URL',
    urlHint: 'Derden posten hierheen; het geheim erin is dat van de webhook.',
    cn: 'Common name (CN) van het certificaat van het apparaat',
    org: 'Organisatie (O)',
    serial: 'Serienummer (serialNumber)',
    csr: 'Certificaatverzoek (PEM) van je tussen-CA',
    certificate: 'Certificaat',
    editorLabel: 'Code van {name}',
    identifies: 'Wijst apparaat {identifier} aan van apparaattype {deviceType}',
  },
);

export interface LogLine {
  type: 'log' | 'error';
  message: string;
}
export interface RunError {
  kind: string;
  message: string;
  line: number | null;
  column: number | null;
}
export interface RunCommon {
  error: RunError | null;
  failed: boolean;
  log: LogLine[];
}

/** A run's failure as a marker in the code, where it has a place. */
export const markersOf = (error: RunError | null | undefined): CodeMarker[] =>
  error && error.line !== null ? [{ line: error.line, column: error.column, message: `${error.kind}: ${error.message}` }] : [];

export function RunFailure({ error }: { error: RunError | null }) {
  if (!error) return null;
  return (
    <p class="bad run-error" role="alert">
      {error.line !== null
        ? t('errorAt', { kind: error.kind, line: error.line, column: error.column ?? 1, message: error.message })
        : t('errorNoPlace', { kind: error.kind, message: error.message })}
    </p>
  );
}

export function LogLines({ log }: { log: LogLine[] }) {
  if (log.length === 0) return <p class="muted small">{t('noLog')}</p>;
  return (
    <ul class="log">
      {log.map((l, i) => (
        <li key={i} class={l.type === 'error' ? 'bad' : undefined}>
          {l.message}
        </li>
      ))}
    </ul>
  );
}

export const Json = ({ value }: { value: unknown }) => <pre class="mono">{JSON.stringify(value, null, 2)}</pre>;

/** failed or not, the failure, the log: what every dry run answers. */
export function RunOutcome({ run, children }: { run: RunCommon; children?: ComponentChildren }) {
  return (
    <div class="run-outcome" data-failed={run.failed ? 'true' : 'false'}>
      <p class={run.failed ? 'bad' : 'ok'}>
        <strong>{run.failed ? t('failed') : t('succeeded')}</strong>
      </p>
      <RunFailure error={run.error} />
      {children}
      <h3>{t('log')}</h3>
      <LogLines log={run.log} />
    </div>
  );
}

interface MeasurementLike {
  channelIndex: number;
  quantityHashId?: string;
  quantity?: string;
  generatedAt: string;
  orderOfMagnitude: number;
  significand: number;
}
const valueOf = (m: MeasurementLike) => Number(`${m.significand}e${m.orderOfMagnitude}`);

export function MeasurementTable({ rows, caption }: { rows: MeasurementLike[]; caption: string }) {
  return (
    <Table
      caption={caption}
      rows={rows}
      rowKey={(m) => `${m.channelIndex}:${m.quantityHashId ?? m.quantity}:${m.generatedAt}:${m.significand}`}
      columns={[
        { title: t('channel'), cell: (m) => m.channelIndex },
        { title: t('quantity'), cell: (m) => <code>{m.quantityHashId ?? m.quantity}</code> },
        { title: t('value'), cell: (m) => String(valueOf(m)) },
        { title: t('generatedAt'), cell: (m) => formatDate(m.generatedAt) },
      ]}
    />
  );
}

const EVENT_HANDLER = `/**
 * Runs for every event of a device of this type: a request it sent, a command, a link to a location, a late report.
 * For an incomingRequest the value returned is the answer the device gets.
 */
function handle(args: Arguments, exec: Exec): Result {
  if (args.event.type !== 'incomingRequest') return;
  const body = args.event.webRequest.body;
  exec.addLog('request from', args.device.supplierDeviceIdentifier, body ? body.type : 'without a body');
  return { statusCode: 204 };
}
`;

const PARSER = `/** Turns a payload the event handler passed to exec.parseReport into a condition report. */
function handle(args: Arguments, exec: Exec): Result {
  const data = JSON.parse(args.payload) as { at?: string };
  exec.addLog('payload of', args.device.supplierDeviceIdentifier);
  return { generatedAt: data.at ? new Date(data.at) : new Date(), measurements: [] };
}
`;

const webhookIdentifier = (
  deviceTypeHashId: string,
) => `/** Names the device a request to this webhook is for; the device is created when it does not exist yet. */
function handle(args: Arguments, exec: Exec): Result {
  const body = args.request.body;
  if (!body || body.type !== 'json' || typeof body.data !== 'object' || body.data === null || Array.isArray(body.data)) {
    throw new Error('a JSON object is expected');
  }
  const id = body.data.deviceId;
  if (typeof id !== 'string') throw new Error('deviceId is missing');
  return { deviceTypeHashId: '${deviceTypeHashId}', deviceIdentifier: id };
}
`;

const certificateIdentifier = (
  deviceTypeHashId: string,
) => `/** Names the device a certificate chained to this one is for; the device is created when it does not exist yet. */
function handle(args: Arguments, exec: Exec): Result {
  const cn = args.certificate.subjects[0].find((s) => s.key.value === 'CN');
  if (!cn) throw new Error('the certificate names no CN');
  return { deviceTypeHashId: '${deviceTypeHashId}', deviceIdentifier: cn.value.value };
}
`;

/** The first code of a new resource of `kind`; identifiers name a device type. */
export function starterCode(kind: CodeKind, deviceTypeHashId = 'hashId of a device type'): string {
  if (kind === 'eventHandler') return EVENT_HANDLER;
  if (kind === 'parser') return PARSER;
  return kind === 'webhookIdentifier' ? webhookIdentifier(deviceTypeHashId) : certificateIdentifier(deviceTypeHashId);
}

interface DeviceTypeRow {
  deviceType: { hashId: string; name: unknown };
}

/** The environment's device types, for a select. */
export function useDeviceTypes() {
  return useAsync(
    (signal) => api<{ rows: DeviceTypeRow[] }>('GET', '/device-type/', { signal, query: { rowsPerPage: 100 } }).then((a) => a.rows.map((r) => r.deviceType)),
    [],
  );
}

export interface ListRow {
  hashId: string;
  name: string;
  created?: string | null;
  extra?: ComponentChildren;
}

/**
 * A kind's resources and the form that adds one: its name and starter code (identifiers: for a chosen device
 * type), plus what else the add takes (`extraFields`, `extraBody`).
 */
export function CodeList({
  title,
  kind,
  base,
  editorPath,
  rowsOf,
  addBody,
  extraFields,
  extraColumn,
}: {
  title: string;
  kind: CodeKind;
  base: string;
  editorPath: string;
  rowsOf: (answer: { rows: unknown[] }) => ListRow[];
  addBody: (name: string, code: string) => Record<string, unknown>;
  extraFields?: ComponentChildren;
  extraColumn?: { title: string; cell: (r: ListRow) => ComponentChildren };
}) {
  const { data, error, loading, reload } = useAsync(
    (signal) => api<{ rows: unknown[] }>('GET', base, { signal, query: { rowsPerPage: 100 } }).then(rowsOf),
    [base],
  );
  const needsType = kind === 'webhookIdentifier' || kind === 'certificateIdentifier';
  const types = useDeviceTypes();
  const [open, setOpen] = useState(false);
  const [name, setName] = useState('');
  const [typeHashId, setTypeHashId] = useState('');
  const [busy, setBusy] = useState(false);
  const [createError, setCreateError] = useState<unknown>(null);

  const create = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setCreateError(null);
    try {
      const answer = await api<{ hashId: string }>('POST', base, { body: addBody(name, starterCode(kind, typeHashId || undefined)) });
      navigate(`${editorPath}/${answer.hashId}`);
    } catch (err) {
      setCreateError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section>
      <PageTitle
        actions={
          <button type="button" class="primary" aria-expanded={open} onClick={() => setOpen(!open)}>
            {t('newOne')}
          </button>
        }
      >
        {title}
      </PageTitle>
      {open && (
        <form class="create panel" onSubmit={create}>
          <TextInput label={t('name')} value={name} onInput={setName} required name="name" autoFocus />
          {needsType && (
            <div class="field">
              <label for="starter-type">{t('deviceType')}</label>
              <select id="starter-type" value={typeHashId} onChange={(e) => setTypeHashId((e.target as HTMLSelectElement).value)}>
                <option value="">{t('none')}</option>
                {(types.data ?? []).map((d) => (
                  <option key={d.hashId} value={d.hashId}>
                    {translated(d.name)} ({d.hashId})
                  </option>
                ))}
              </select>
            </div>
          )}
          {extraFields}
          <p class="muted small">{t('starterHint')}</p>
          <ErrorBox error={createError} />
          <button type="submit" class="primary" disabled={busy}>
            {busy ? t('creating') : t('create')}
          </button>
        </form>
      )}
      <ErrorBox error={error} onRetry={reload} />
      {loading && <Loading />}
      {data && (
        <Table
          caption={title}
          rows={data}
          rowKey={(r) => r.hashId}
          onRow={(r) => navigate(`${editorPath}/${r.hashId}`)}
          columns={[
            { title: t('name'), cell: (r) => <a href={`#${editorPath}/${r.hashId}`}>{r.name}</a> },
            { title: t('id'), cell: (r) => <code>{r.hashId}</code> },
            ...(extraColumn ? [extraColumn] : []),
          ]}
        />
      )}
    </section>
  );
}

/**
 * The editor page of a report type's parser, a webhook's identifier or a certificate's identifier: name, code,
 * Try beside it (a dry run of the code as it is in the editor), Save.
 */
export function CodePage<A extends RunCommon>({
  kind,
  base,
  hashId,
  field,
  listPath,
  load,
  tryFields,
  tryInput,
  result,
  info,
}: {
  kind: CodeKind;
  base: string;
  hashId: string;
  field: 'parser' | 'identifier';
  listPath: string;
  load: (answer: Record<string, unknown>) => { name: string; code: string };
  /** the inputs of a dry run (kept by the page) and the dry run's body members besides the code */
  tryFields: ComponentChildren;
  tryInput: () => Record<string, unknown>;
  result: (answer: A) => ComponentChildren;
  info?: (answer: Record<string, unknown>) => ComponentChildren;
}) {
  const loaded = useAsync((signal) => api<Record<string, unknown>>('GET', `${base}${hashId}`, { signal }), [base, hashId]);
  const [name, setName] = useState('');
  const [code, setCode] = useState('');
  const [saved, setSaved] = useState<{ name: string; code: string } | null>(null);
  const [saving, setSaving] = useState(false);
  const [saveError, setSaveError] = useState<unknown>(null);
  const [justSaved, setJustSaved] = useState(false);
  const [running, setRunning] = useState(false);
  const [runError, setRunError] = useState<unknown>(null);
  const [answer, setAnswer] = useState<A | null>(null);

  useEffect(() => {
    if (!loaded.data) return;
    const v = load(loaded.data);
    setName(v.name);
    setCode(v.code);
    setSaved(v);
  }, [loaded.data]);

  const dirty = saved !== null && (saved.name !== name || saved.code !== code);

  const run = async (e: Event) => {
    e.preventDefault();
    setRunning(true);
    setRunError(null);
    try {
      setAnswer(await api<A>('POST', `${base}${hashId}/dry-run`, { body: { ...tryInput(), [field]: code } }));
    } catch (err) {
      setAnswer(null);
      setRunError(err);
    } finally {
      setRunning(false);
    }
  };

  const save = async () => {
    setSaving(true);
    setSaveError(null);
    setJustSaved(false);
    try {
      await api('POST', `${base}${hashId}`, { body: { ...(saved?.name !== name ? { name } : {}), [field]: code } });
      setSaved({ name, code });
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
          <a href={`#${listPath}`}>{t('back')}</a>
        </p>
      </section>
    );
  if (!loaded.data || saved === null) return <Loading />;
  return (
    <section>
      <PageTitle actions={<a href={`#${listPath}`}>{t('back')}</a>}>{saved.name || hashId}</PageTitle>
      {info?.(loaded.data)}
      <div class="workbench">
        <div>
          <TextInput label={t('name')} value={name} onInput={setName} required name="name" />
          <CodeEditor kind={kind} value={code} onChange={setCode} label={t('editorLabel', { name: saved.name || hashId })} markers={markersOf(answer?.error)} />
          <div class="row">
            <button type="button" class="primary" onClick={save} disabled={saving || !dirty}>
              {saving ? t('saving') : t('save')}
            </button>
            {dirty && <span class="warn">{t('unsaved')}</span>}
            {justSaved && !dirty && (
              <span class="ok" role="status">
                {t('saved')}
              </span>
            )}
          </div>
          <ErrorBox error={saveError} />
        </div>
        <form class="panel try" onSubmit={run} aria-labelledby="try-title">
          <h2 id="try-title">{t('tryTitle')}</h2>
          <p class="muted small">{t('nothingChanged')}</p>
          {tryFields}
          <button type="submit" class="primary" disabled={running}>
            {running ? t('running') : t('run')}
          </button>
          <ErrorBox error={runError} />
          {answer && (
            <div class="result" aria-live="polite">
              <h3>{t('result')}</h3>
              <RunOutcome run={answer}>{result(answer)}</RunOutcome>
            </div>
          )}
        </form>
      </div>
    </section>
  );
}

/** What an identifier's dry run names. */
export interface IdentifierAnswer extends RunCommon {
  result: { deviceTypeHashId: string; deviceIdentifier: string } | null;
  device: { hashId: string | null; deviceTypeHashId: string; created: boolean } | null;
}

export function IdentifierResult({ answer }: { answer: IdentifierAnswer }) {
  if (!answer.result) return <p class="muted">{t('noResult')}</p>;
  return (
    <dl>
      <dt>{t('device')}</dt>
      <dd>{t('identifies', { identifier: answer.result.deviceIdentifier, deviceType: answer.result.deviceTypeHashId })}</dd>
      {answer.device && (
        <>
          <dt />
          <dd>{answer.device.created ? t('newDevice') : t('existingDevice', { hashId: answer.device.hashId ?? '' })}</dd>
        </>
      )}
    </dl>
  );
}

export const createdCell = (iso: string | null | undefined) => formatDate(iso);
