// Import (import-request generate-template / add / find): measurements entered in a sheet. The template names a
// line per pin of the chosen pin groups and per report type; the filled file is checked line by line, and when a
// line fails nothing is imported and every failing line is named.
import { useState } from 'preact/hooks';
import { api, findAll } from '../api.ts';
import { formatDate, messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { hasRight } from '../session.ts';
import { ErrorBox, Field, Loading, PageTitle, Table, useAsync } from '../ui.tsx';
import { dataUrlOf, Pager, saveFile, usePager, usePinGroups } from './admin/parts.tsx';

interface ImportRequest {
  hashId: string;
  name: string;
  state: string;
  errors: string[] | null;
  createdAt: string | null;
}

const t = messages(
  {
    title: 'Import',
    template: '1. Download a template',
    templateHint:
      'A CSV with a line per pin of the chosen pin groups and per report type; fill in generatedAt, quantityHashId, orderOfMagnitude and significand (value = significand × 10^orderOfMagnitude).',
    pinGroups: 'Pin groups',
    reportTypes: 'Report types',
    downloadTemplate: 'Download template',
    noReportTypes: 'This environment has no report types of its own yet (Reports: report types).',
    upload: '2. Upload the filled file',
    file: 'CSV file',
    submit: 'Import',
    imported: '{name} imported.',
    invalid: '{name} was not imported: {count} line(s) failed. Nothing was stored.',
    failing: 'Failing lines',
    history: 'Earlier imports',
    name: 'File',
    state: 'Result',
    when: 'When',
    success: 'imported',
    invalidState: 'not imported',
    deleted: 'removed',
    noRight: 'Importing needs the right IMPORT.',
    chooseFile: 'Choose a CSV file first.',
    caption: 'Earlier imports',
    chooseBoth: 'Choose at least one pin group and one report type.',
    errors: 'Failing lines',
  },
  {
    title: 'Import',
    template: '1. Een sjabloon downloaden',
    templateHint:
      'Een CSV met een regel per poort van de gekozen locaties en per rapporttype; vul generatedAt, quantityHashId, orderOfMagnitude en significand in (waarde = significand × 10^orderOfMagnitude).',
    pinGroups: 'Locaties',
    reportTypes: 'Rapporttypes',
    downloadTemplate: 'Sjabloon downloaden',
    noReportTypes: 'Deze omgeving heeft nog geen eigen rapporttypes.',
    upload: '2. Het ingevulde bestand uploaden',
    file: 'CSV-bestand',
    submit: 'Importeren',
    imported: '{name} geïmporteerd.',
    invalid: '{name} is niet geïmporteerd: {count} regel(s) faalden. Er is niets opgeslagen.',
    failing: 'Foute regels',
    history: 'Eerdere imports',
    name: 'Bestand',
    state: 'Resultaat',
    when: 'Wanneer',
    success: 'geïmporteerd',
    invalidState: 'niet geïmporteerd',
    deleted: 'verwijderd',
    noRight: 'Importeren vraagt het recht IMPORT.',
    chooseFile: 'Kies eerst een CSV-bestand.',
    caption: 'Eerdere imports',
    chooseBoth: 'Kies minstens één locatie en één rapporttype.',
    errors: 'Foute regels',
  },
);

const stateText = (state: string) =>
  state === 'success' ? t('success') : state === 'invalid' ? t('invalidState') : state === 'deleted' ? t('deleted') : state;

function FailingLines({ errors }: { errors: string[] }) {
  return (
    <ul class="failing" aria-label={t('failing')}>
      {errors.map((e, i) => (
        <li key={i}>{e}</li>
      ))}
    </ul>
  );
}

export default function Imports(_: PageProps) {
  const pinGroups = usePinGroups();
  const reportTypes = useAsync(
    async () =>
      (await findAll<{ reportType: { hashId: string; name: string } }>('/report-type/', { type: 'human', sortBy: 'name' }, 500)).map((r) => r.reportType),
    [],
  );
  const [chosenGroups, setChosenGroups] = useState<string[]>([]);
  const [chosenTypes, setChosenTypes] = useState<string[]>([]);
  const [templateError, setTemplateError] = useState<unknown>(null);
  const [file, setFile] = useState<File | null>(null);
  const [uploadError, setUploadError] = useState<unknown>(null);
  const [result, setResult] = useState<ImportRequest | null>(null);
  const [busy, setBusy] = useState(false);
  const pager = usePager();
  const history = useAsync(
    (signal) =>
      api<{ rows: { importRequest: ImportRequest }[]; nextPageOffset: string | null }>('GET', '/import/', {
        query: { sortBy: 'createdAt', descending: true, rowsPerPage: 10, offset: pager.offset },
        signal,
      }),
    [pager.offset],
  );

  const toggle = (list: string[], set: (l: string[]) => void, hashId: string, on: boolean) => set(on ? [...list, hashId] : list.filter((h) => h !== hashId));

  const downloadTemplate = async (e: Event) => {
    e.preventDefault();
    setTemplateError(null);
    if (chosenGroups.length === 0 || chosenTypes.length === 0) return setTemplateError(new Error(t('chooseBoth')));
    try {
      const answer = await api<{ url: string; name: string }>('POST', '/import/template', {
        body: { pinGroupHashIds: chosenGroups, pinGroupGridHashIds: [], reportTypeHashIds: chosenTypes },
      });
      saveFile(answer.url, answer.name || 'import-template.csv');
    } catch (err) {
      setTemplateError(err);
    }
  };

  const upload = async (e: Event) => {
    e.preventDefault();
    setUploadError(null);
    setResult(null);
    if (!file) return setUploadError(new Error(t('chooseFile')));
    setBusy(true);
    try {
      // the sheet's media type as the API reads it, whatever the browser guessed for the file
      const dataUrl = (await dataUrlOf(file)).replace(/^data:[^;,]*/, 'data:text/csv');
      const answer = await api<{ importRequest: ImportRequest }>('POST', '/import/', { body: { name: file.name, dataUrl } });
      setResult(answer.importRequest);
      history.reload();
    } catch (err) {
      setUploadError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      {!hasRight('IMPORT') && (
        <p class="notice" role="note">
          {t('noRight')}
        </p>
      )}
      <form class="panel-box" onSubmit={downloadTemplate} aria-labelledby="import-template">
        <h2 id="import-template">{t('template')}</h2>
        <p class="muted">{t('templateHint')}</p>
        <div class="grid-2">
          <fieldset>
            <legend>{t('pinGroups')}</legend>
            {pinGroups.error ? (
              <ErrorBox error={pinGroups.error} />
            ) : !pinGroups.data ? (
              <Loading />
            ) : (
              pinGroups.data.map((p) => (
                <div class="field check" key={p.hashId}>
                  <label>
                    <input
                      type="checkbox"
                      name="pinGroup"
                      value={p.hashId}
                      checked={chosenGroups.includes(p.hashId)}
                      onChange={(e) => toggle(chosenGroups, setChosenGroups, p.hashId, (e.target as HTMLInputElement).checked)}
                    />{' '}
                    {p.name || p.hashId}
                  </label>
                </div>
              ))
            )}
          </fieldset>
          <fieldset>
            <legend>{t('reportTypes')}</legend>
            {reportTypes.error ? (
              <ErrorBox error={reportTypes.error} />
            ) : !reportTypes.data ? (
              <Loading />
            ) : reportTypes.data.length === 0 ? (
              <p class="muted">{t('noReportTypes')}</p>
            ) : (
              reportTypes.data.map((r) => (
                <div class="field check" key={r.hashId}>
                  <label>
                    <input
                      type="checkbox"
                      name="reportType"
                      value={r.hashId}
                      checked={chosenTypes.includes(r.hashId)}
                      onChange={(e) => toggle(chosenTypes, setChosenTypes, r.hashId, (e.target as HTMLInputElement).checked)}
                    />{' '}
                    {r.name}
                  </label>
                </div>
              ))
            )}
          </fieldset>
        </div>
        <ErrorBox error={templateError} />
        <button type="submit">{t('downloadTemplate')}</button>
      </form>

      <form class="panel-box" onSubmit={upload} aria-labelledby="import-upload">
        <h2 id="import-upload">{t('upload')}</h2>
        <Field label={t('file')}>
          {(id) => (
            <input id={id} name="file" type="file" accept=".csv,text/csv" onChange={(e) => setFile((e.target as HTMLInputElement).files?.[0] ?? null)} />
          )}
        </Field>
        <ErrorBox error={uploadError} />
        {result &&
          (result.state === 'success' ? (
            <p class="ok" role="status">
              {t('imported', { name: result.name })}
            </p>
          ) : (
            <div role="alert">
              <p class="bad">{t('invalid', { name: result.name, count: result.errors?.length ?? 0 })}</p>
              <FailingLines errors={result.errors ?? []} />
            </div>
          ))}
        <button type="submit" class="primary" disabled={busy}>
          {t('submit')}
        </button>
      </form>

      <h2>{t('history')}</h2>
      {history.error ? (
        <ErrorBox error={history.error} onRetry={history.reload} />
      ) : !history.data ? (
        <Loading />
      ) : (
        <>
          <Table
            caption={t('caption')}
            rows={history.data.rows.map((r) => r.importRequest)}
            rowKey={(r) => r.hashId}
            columns={[
              { title: t('when'), cell: (r) => formatDate(r.createdAt) },
              { title: t('name'), cell: (r) => r.name },
              { title: t('state'), cell: (r) => <span class={r.state === 'success' ? 'ok' : 'bad'}>{stateText(r.state)}</span> },
              {
                title: t('errors'),
                cell: (r) =>
                  r.errors && r.errors.length > 0 ? (
                    <details>
                      <summary>{r.errors.length}</summary>
                      <FailingLines errors={r.errors} />
                    </details>
                  ) : (
                    '–'
                  ),
              },
            ]}
          />
          <Pager page={pager.page} nextOffset={history.data.nextPageOffset} onNext={pager.next} onPrevious={pager.previous} />
        </>
      )}
    </section>
  );
}
