// A device (/devices/:hashId): who it is (identity, fields, last online), how it gets in (credentials, claim
// token), what it did (connectivity counters as charts, its live log), what it is told (commands, firmware).
// The charts' code (uPlot) is loaded with this page only.
import './device/device.css';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { formatDate, messages, translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { navigate } from '../router.ts';
import { ErrorBox, Loading, PageTitle, useAsync } from '../ui.tsx';
import { ClaimToken, Credentials, FirmwarePart } from './device/Access.tsx';
import { ActivityLog } from './device/ActivityLog.tsx';
import { Commands } from './device/Commands.tsx';
import { Counters } from './device/Counters.tsx';
import type { ActivityDetail, ActivitySummary, CommandType, DeviceRow, DeviceType, FieldConfiguration } from './device/types.ts';
import { Ago, deviceName, Section } from './parts.tsx';

const t = messages(
  {
    back: 'All devices',
    identity: 'Identity',
    credentials: 'Credentials',
    claim: 'Claim token',
    counters: 'Connectivity counters',
    commands: 'Commands',
    firmware: 'Firmware',
    live: 'Live log',
    hashId: 'Id',
    supplierId: 'Supplier device identifier',
    type: 'Device type',
    lastOnline: 'Last online',
    nextReport: 'Next report expected before',
    validated: 'Validated',
    yes: 'yes',
    no: 'no',
    claimedBy: 'Claimed by',
    notClaimed: 'not claimed',
    fields: 'Fields',
    noFields: 'No fields.',
    onThisPage: 'On this page',
    remove: 'Delete device',
    confirm: 'Delete this device? Its credentials stop working at once.',
    openLive: 'Open in the live log',
  },
  {
    back: 'Alle apparaten',
    identity: 'Identiteit',
    credentials: 'Inloggegevens',
    claim: 'Claimtoken',
    counters: 'Connectiviteitstellers',
    commands: "Commando's",
    firmware: 'Firmware',
    live: 'Live log',
    hashId: 'Id',
    supplierId: 'Identificatie van de leverancier',
    type: 'Apparaattype',
    lastOnline: 'Laatst online',
    nextReport: 'Volgend rapport verwacht vóór',
    validated: 'Gevalideerd',
    yes: 'ja',
    no: 'nee',
    claimedBy: 'Geclaimd door',
    notClaimed: 'niet geclaimd',
    fields: 'Velden',
    noFields: 'Geen velden.',
    onThisPage: 'Op deze pagina',
    remove: 'Apparaat verwijderen',
    confirm: 'Dit apparaat verwijderen? De inloggegevens werken direct niet meer.',
    openLive: 'Openen in de live log',
  },
);

interface TypeAnswer {
  deviceType: DeviceType;
  commandTypes: CommandType[];
}

const SECTIONS = ['identity', 'credentials', 'claim', 'counters', 'commands', 'live', 'firmware'] as const;

export default function Device({ params }: PageProps) {
  const hashId = params.hashId;
  const device = useAsync((signal) => api<DeviceRow>('GET', `/device/${encodeURIComponent(hashId)}`, { signal }), [hashId]);
  const typeHashId = device.data?.device.deviceTypeHashId;
  const type = useAsync(
    (signal) => (typeHashId ? api<TypeAnswer>('GET', `/device-type/${encodeURIComponent(typeHashId)}`, { signal }) : Promise.resolve(null)),
    [typeHashId],
  );
  const [lastOnline, setLastOnline] = useState<string | null>(null);
  const [lastRequest, setLastRequest] = useState<ActivityDetail | null>(null);
  const [commandsRefresh, setCommandsRefresh] = useState(0);
  const [removeError, setRemoveError] = useState<unknown>(null);

  // the last request the device made: its credentials and the firmware its answer offered
  useEffect(() => {
    const controller = new AbortController();
    setLastRequest(null);
    api<{ rows: ActivitySummary[] }>('GET', '/supplier-activity/', {
      signal: controller.signal,
      query: { deviceHashId: hashId, triggerType: 'handleIncomingRequest', rowsPerPage: 1, sortBy: 'createdAt', descending: true },
    })
      .then(async (page) => {
        const row = page.rows[0];
        if (!row) return;
        const detail = await api<ActivityDetail>('GET', `/supplier-activity/${encodeURIComponent(row.activity.hashId)}`, { signal: controller.signal });
        setLastRequest((current) => current ?? detail);
      })
      .catch(() => undefined);
    return () => controller.abort();
  }, [hashId]);

  // what the live log hears updates the rest of the page: last online, the last request, the commands' state
  const heard = useCallback((d: ActivityDetail) => {
    if (d.device?.lastOnlineAt) setLastOnline(d.device.lastOnlineAt);
    if (d.activity.triggerType === 'handleIncomingRequest') setLastRequest(d);
    if (d.activity.activities.some((a) => /command/i.test(a.triggerType)) || /command/i.test(d.activity.triggerType)) setCommandsRefresh((n) => n + 1);
  }, []);

  if (device.error)
    return (
      <section>
        <PageTitle>{t('back')}</PageTitle>
        <ErrorBox error={device.error} onRetry={device.reload} />
        <p>
          <a href="#/devices">{t('back')}</a>
        </p>
      </section>
    );
  if (!device.data) return <Loading />;
  const { device: d, deviceType, environmentName } = device.data;
  const remove = async () => {
    if (!confirm(t('confirm'))) return;
    try {
      await api('POST', '/device/delete', { body: { hashIds: [hashId] } });
      navigate('/devices');
    } catch (err) {
      setRemoveError(err);
    }
  };

  return (
    <article class="device-page">
      <p class="small">
        <a href="#/devices">← {t('back')}</a>
      </p>
      <PageTitle
        actions={
          <>
            <a class="button" href={`#/live?device=${encodeURIComponent(hashId)}`}>
              {t('openLive')}
            </a>
            <button type="button" class="danger" onClick={remove}>
              {t('remove')}
            </button>
          </>
        }
      >
        {deviceName(d)}
      </PageTitle>
      <ErrorBox error={removeError} />
      <nav aria-label={t('onThisPage')} class="in-page">
        <ul>
          {SECTIONS.map((s) => (
            <li key={s}>
              <a
                href={`#/devices/${hashId}`}
                onClick={(e) => {
                  e.preventDefault();
                  document.getElementById(`${s}-title`)?.scrollIntoView();
                }}
              >
                {t(s)}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <div class="grid-2">
        <Section title={t('identity')} id="identity">
          <dl>
            <dt>{t('hashId')}</dt>
            <dd>
              <code>{d.hashId}</code>
            </dd>
            <dt>{t('supplierId')}</dt>
            <dd>{d.supplierDeviceIdentifier}</dd>
            <dt>{t('type')}</dt>
            <dd>
              <a href={`#/device-types/${deviceType.hashId}`}>{translated(deviceType.name)}</a>
            </dd>
            <dt>{t('lastOnline')}</dt>
            <dd data-testid="last-online">
              <Ago iso={lastOnline ?? d.lastOnlineAt} />
              {(lastOnline ?? d.lastOnlineAt) && <span class="muted small"> ({formatDate(lastOnline ?? d.lastOnlineAt)})</span>}
            </dd>
            {d.nextReportBefore && (
              <>
                <dt>{t('nextReport')}</dt>
                <dd>{formatDate(d.nextReportBefore)}</dd>
              </>
            )}
            <dt>{t('validated')}</dt>
            <dd>{d.validated ? t('yes') : t('no')}</dd>
            <dt>{t('claimedBy')}</dt>
            <dd>{environmentName ?? <span class="muted">{t('notClaimed')}</span>}</dd>
          </dl>
          <h3>{t('fields')}</h3>
          <Fields fields={d.fields} configs={deviceType.fieldConfigurations} />
        </Section>
        <div>
          <Section title={t('credentials')} id="credentials">
            <Credentials last={lastRequest} />
          </Section>
          <Section title={t('claim')} id="claim">
            <ClaimToken deviceHashId={hashId} claimedBy={environmentName} />
          </Section>
        </div>
      </div>
      <Section title={t('counters')} id="counters">
        <Counters deviceHashId={hashId} />
      </Section>
      <Section title={t('commands')} id="commands">
        <ErrorBox error={type.error} onRetry={type.reload} />
        {type.data ? <Commands deviceHashId={hashId} commandTypes={type.data.commandTypes} refresh={commandsRefresh} /> : !type.error && <Loading />}
      </Section>
      <Section title={t('live')} id="live">
        <ActivityLog deviceHashId={hashId} oneDevice initial={10} cap={200} headingLevel={4} onActivity={heard} />
      </Section>
      <Section title={t('firmware')} id="firmware">
        <FirmwarePart deviceTypeHashId={deviceType.hashId} last={lastRequest} />
      </Section>
    </article>
  );
}

function Fields({ fields, configs }: { fields: Record<string, unknown>; configs: FieldConfiguration[] }) {
  const keys = [...new Set([...configs.map((c) => c.key), ...Object.keys(fields ?? {})])];
  if (keys.length === 0) return <p class="muted">{t('noFields')}</p>;
  const name = (key: string) => translated(configs.find((c) => c.key === key)?.name) || key;
  return (
    <dl>
      {keys.map((k) => {
        const v = fields?.[k];
        return [
          <dt key={`${k}-t`}>{name(k)}</dt>,
          <dd key={`${k}-d`}>{v === undefined || v === null ? '–' : typeof v === 'string' ? v : <code>{JSON.stringify(v)}</code>}</dd>,
        ];
      })}
    </dl>
  );
}
