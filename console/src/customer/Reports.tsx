// Manual reports (report add, REPORTS): a pin group, one of the environment's report types, the type's form and
// a measurement per pin and quantity; the recent reports below (report find).
import { useEffect, useState } from 'preact/hooks';
import { api, findAll } from '../api.ts';
import { formatDate, messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { hasRight } from '../session.ts';
import { ErrorBox, Field, Loading, PageTitle, Table, useAsync } from '../ui.tsx';
import { FieldForm, problems, type FieldConfiguration } from '../forms/FieldForm.tsx';
import { Pager, PinGroupSelect, usePager, usePinGroups, valuePair } from './admin/parts.tsx';

interface ReportType {
  hashId: string;
  name: string;
  fieldConfigurations: { pinGroup: FieldConfiguration[]; pin: FieldConfiguration[]; measurement: FieldConfiguration[] };
}
interface Quantity {
  hashId: string;
  name: string;
  unit: string | null;
}
interface Pin {
  hashId: string;
  name: string;
}
interface ReportRow {
  report: { hashId: string; generatedAt: string; reportTypeType: string; deviceHashId: string | null };
  pinGroup: { hashId: string; name: string };
  reportTypeName: string;
}

const t = messages(
  {
    title: 'Reports',
    add: 'Enter a report',
    reportType: 'Report type',
    choose: '— choose —',
    generatedAt: 'Measured at',
    form: 'Form',
    measurements: 'Measurements',
    pin: 'Pin',
    quantity: 'Quantity',
    value: 'Value',
    submit: 'Submit report',
    submitted: 'Report stored.',
    notNumber: '{pin}, {quantity}: "{value}" is not a number the service stores.',
    noTypes: 'This environment has no report types of its own yet.',
    noPins: 'This pin group has no pins.',
    noQuantities: 'This report type measures no quantities.',
    recent: 'Recent reports',
    when: 'Measured at',
    pinGroup: 'Pin group',
    type: 'Type',
    by: 'From',
    device: 'device',
    manual: 'by hand',
    caption: 'Reports, newest first',
    noRight: 'Entering reports needs the right REPORTS.',
    onlyThis: 'Only this pin group',
    valueOf: 'Value of {quantity} on {pin}',
  },
  {
    title: 'Rapporten',
    add: 'Een rapport invoeren',
    reportType: 'Rapporttype',
    choose: '— kies —',
    generatedAt: 'Gemeten op',
    form: 'Formulier',
    measurements: 'Metingen',
    pin: 'Poort',
    quantity: 'Grootheid',
    value: 'Waarde',
    submit: 'Rapport opslaan',
    submitted: 'Rapport opgeslagen.',
    notNumber: '{pin}, {quantity}: "{value}" is geen getal dat de service opslaat.',
    noTypes: 'Deze omgeving heeft nog geen eigen rapporttypes.',
    noPins: 'Deze locatie heeft geen poorten.',
    noQuantities: 'Dit rapporttype meet geen grootheden.',
    recent: 'Recente rapporten',
    when: 'Gemeten op',
    pinGroup: 'Locatie',
    type: 'Type',
    by: 'Van',
    device: 'apparaat',
    manual: 'handmatig',
    caption: 'Rapporten, nieuwste eerst',
    noRight: 'Rapporten invoeren vraagt het recht REPORTS.',
    onlyThis: 'Alleen deze locatie',
    valueOf: 'Waarde van {quantity} op {pin}',
  },
);

const localInput = (d: Date) => new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);

export default function Reports({ query }: PageProps) {
  const pinGroups = usePinGroups();
  const reportTypes = useAsync(
    async () => (await findAll<{ reportType: ReportType }>('/report-type/', { type: 'human', sortBy: 'name' }, 500)).map((r) => r.reportType),
    [],
  );
  const [pinGroupHashId, setPinGroupHashId] = useState(query.get('pinGroup') ?? '');
  const [reportTypeHashId, setReportTypeHashId] = useState('');
  const [generatedAt, setGeneratedAt] = useState(localInput(new Date()));
  const [fields, setFields] = useState<Record<string, unknown>>({});
  const [values, setValues] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);
  const [busy, setBusy] = useState(false);
  const [onlyThis, setOnlyThis] = useState(false);
  const pager = usePager();

  const detail = useAsync(
    async (signal) =>
      reportTypeHashId
        ? api<{ reportType: ReportType; quantities: Quantity[] }>('GET', `/report-type/${encodeURIComponent(reportTypeHashId)}`, { signal })
        : null,
    [reportTypeHashId],
  );
  const pins = useAsync(
    async (signal) =>
      pinGroupHashId
        ? (await api<{ pins: { pin: Pin }[] }>('GET', `/graph/pin-group/${encodeURIComponent(pinGroupHashId)}`, { signal })).pins.map((p) => p.pin)
        : [],
    [pinGroupHashId],
  );
  const recent = useAsync(
    (signal) =>
      api<{ rows: ReportRow[]; nextPageOffset: string | null }>('GET', '/report/', {
        query: { rowsPerPage: 10, offset: pager.offset, pinGroupHashId: onlyThis && pinGroupHashId ? pinGroupHashId : undefined },
        signal,
      }),
    [pager.offset, onlyThis, onlyThis ? pinGroupHashId : ''],
  );

  useEffect(() => {
    setFields({});
    setValues({});
  }, [reportTypeHashId]);
  useEffect(() => {
    setValues({});
  }, [pinGroupHashId]);

  const quantities = detail.data?.quantities ?? [];
  const pinList = pins.data ?? [];

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setDone(false);
    const formProblems = Object.entries(problems(detail.data?.reportType.fieldConfigurations.pinGroup ?? [], fields));
    if (formProblems.length > 0) return setError(new Error(formProblems.map(([k, p]) => `${k}: ${p}`).join('; ')));
    const at = new Date(generatedAt).toISOString();
    const measurements = [];
    for (const pin of pinList) {
      for (const q of quantities) {
        const text = values[`${pin.hashId}/${q.hashId}`] ?? '';
        if (text.trim() === '') continue;
        const pair = valuePair(text);
        if (!pair) return setError(new Error(t('notNumber', { pin: pin.name, quantity: q.name, value: text })));
        measurements.push({ pinHashId: pin.hashId, quantityHashId: q.hashId, generatedAt: at, ...pair });
      }
    }
    setBusy(true);
    try {
      await api('POST', '/report/', { body: { pinGroupHashId, reportTypeHashId, generatedAt: at, fields, measurements } });
      setDone(true);
      setValues({});
      pager.reset();
      recent.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      {!hasRight('REPORTS') && (
        <p class="notice" role="note">
          {t('noRight')}
        </p>
      )}
      <form class="panel-box" onSubmit={submit} aria-labelledby="report-add">
        <h2 id="report-add">{t('add')}</h2>
        {pinGroups.error && <ErrorBox error={pinGroups.error} onRetry={pinGroups.reload} />}
        {reportTypes.error && <ErrorBox error={reportTypes.error} onRetry={reportTypes.reload} />}
        <div class="form-row">
          <PinGroupSelect value={pinGroupHashId} onChange={setPinGroupHashId} pinGroups={pinGroups.data ?? []} />
          <Field label={t('reportType')}>
            {(id) => (
              <select id={id} name="reportType" value={reportTypeHashId} onChange={(e) => setReportTypeHashId((e.target as HTMLSelectElement).value)}>
                <option value="">{t('choose')}</option>
                {(reportTypes.data ?? []).map((r) => (
                  <option key={r.hashId} value={r.hashId}>
                    {r.name}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label={t('generatedAt')}>
            {(id) => (
              <input
                id={id}
                name="generatedAt"
                type="datetime-local"
                required
                value={generatedAt}
                onInput={(e) => setGeneratedAt((e.target as HTMLInputElement).value)}
              />
            )}
          </Field>
        </div>
        {reportTypes.data && reportTypes.data.length === 0 && <p class="muted">{t('noTypes')}</p>}
        {detail.error && <ErrorBox error={detail.error} onRetry={detail.reload} />}
        {pins.error && <ErrorBox error={pins.error} onRetry={pins.reload} />}
        {detail.data && pinGroupHashId && (
          <>
            {detail.data.reportType.fieldConfigurations.pinGroup.length > 0 && (
              <fieldset>
                <legend>{t('form')}</legend>
                <FieldForm configurations={detail.data.reportType.fieldConfigurations.pinGroup} values={fields} onChange={setFields} />
              </fieldset>
            )}
            <fieldset>
              <legend>{t('measurements')}</legend>
              {pins.loading && !pins.data ? (
                <Loading />
              ) : pinList.length === 0 ? (
                <p class="muted">{t('noPins')}</p>
              ) : quantities.length === 0 ? (
                <p class="muted">{t('noQuantities')}</p>
              ) : (
                <table class="measurements">
                  <caption class="sr-only">{t('measurements')}</caption>
                  <thead>
                    <tr>
                      <th scope="col">{t('pin')}</th>
                      {quantities.map((q) => (
                        <th scope="col" key={q.hashId}>
                          {q.name}
                          {q.unit ? ` (${q.unit})` : ''}
                        </th>
                      ))}
                    </tr>
                  </thead>
                  <tbody>
                    {pinList.map((pin) => (
                      <tr key={pin.hashId}>
                        <th scope="row">{pin.name || pin.hashId}</th>
                        {quantities.map((q) => {
                          const key = `${pin.hashId}/${q.hashId}`;
                          return (
                            <td key={q.hashId}>
                              <input
                                name={`value-${key}`}
                                inputMode="decimal"
                                aria-label={t('valueOf', { quantity: q.name, pin: pin.name || pin.hashId })}
                                value={values[key] ?? ''}
                                onInput={(e) => setValues({ ...values, [key]: (e.target as HTMLInputElement).value })}
                              />
                            </td>
                          );
                        })}
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
            </fieldset>
          </>
        )}
        <ErrorBox error={error} />
        {done && (
          <p class="ok" role="status">
            {t('submitted')}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy || !pinGroupHashId || !reportTypeHashId}>
          {t('submit')}
        </button>
      </form>

      <div class="page-title">
        <h2>{t('recent')}</h2>
        <div class="field check">
          <label>
            <input
              type="checkbox"
              checked={onlyThis}
              disabled={!pinGroupHashId}
              onChange={(e) => {
                pager.reset();
                setOnlyThis((e.target as HTMLInputElement).checked);
              }}
            />{' '}
            {t('onlyThis')}
          </label>
        </div>
      </div>
      {recent.error ? (
        <ErrorBox error={recent.error} onRetry={recent.reload} />
      ) : !recent.data ? (
        <Loading />
      ) : (
        <>
          <Table
            caption={t('caption')}
            rows={recent.data.rows}
            rowKey={(r) => r.report.hashId}
            columns={[
              { title: t('when'), cell: (r) => formatDate(r.report.generatedAt) },
              {
                title: t('pinGroup'),
                cell: (r) => <a href={`#/pin-groups/${encodeURIComponent(r.pinGroup.hashId)}`}>{r.pinGroup.name || r.pinGroup.hashId}</a>,
              },
              { title: t('type'), cell: (r) => r.reportTypeName },
              { title: t('by'), cell: (r) => (r.report.reportTypeType === 'human' ? t('manual') : t('device')) },
            ]}
          />
          <Pager page={pager.page} nextOffset={recent.data.nextPageOffset} onNext={pager.next} onPrevious={pager.previous} />
        </>
      )}
    </section>
  );
}
