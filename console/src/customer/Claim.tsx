// Linking a device (/claim): claim devices with the claim tokens their supplier handed over, link a claimed device
// to a pin group with its channel mapping (each channel to a pin of the pin group, or to a new pin named as the
// channel's default), and unlink it. `?pinGroupHashId=` (from a pin group's page) preselects the pin group.
import { useEffect, useState } from 'preact/hooks';
import { api, findAll } from '../api.ts';
import { formatDate, messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { hasRight } from '../session.ts';
import { ErrorBox, Field, Loading, PageTitle, Table, useAsync } from '../ui.tsx';
import type { Pin, PinGroup } from './parts/parts.tsx';
import './parts/parts.css';

const t = messages(
  {
    title: 'Link a device',
    claim: 'Claim devices',
    tokens: 'Claim tokens',
    tokensHint: 'One per line, as the supplier gave them.',
    doClaim: 'Claim',
    claimed: 'Claimed: {list}',
    devices: 'Your devices',
    device: 'Device',
    type: 'Device type',
    place: 'Pin group',
    lastContact: 'Last contact',
    never: 'never',
    none: 'No device claimed yet.',
    link: 'Link',
    linkTitle: 'Link {device} to a pin group',
    pinGroup: 'Pin group',
    choose: 'Choose…',
    channel: 'Channel {name}',
    newPin: 'A new pin ({name})',
    doLink: 'Link device',
    cancel: 'Cancel',
    linked: '{device} is linked to {place}.',
    unlink: 'Unlink',
    unlinked: '{device} is unlinked.',
    noRight: 'Linking devices needs the right SENSORS.',
    notLinked: 'not linked',
  },
  {
    title: 'Apparaat koppelen',
    claim: 'Apparaten claimen',
    tokens: 'Claimcodes',
    tokensHint: 'Eén per regel, zoals de leverancier ze gaf.',
    doClaim: 'Claimen',
    claimed: 'Geclaimd: {list}',
    devices: 'Je apparaten',
    device: 'Apparaat',
    type: 'Apparaattype',
    place: 'Locatie',
    lastContact: 'Laatste contact',
    never: 'nooit',
    none: 'Nog geen apparaat geclaimd.',
    link: 'Koppelen',
    linkTitle: '{device} aan een locatie koppelen',
    pinGroup: 'Locatie',
    choose: 'Kies…',
    channel: 'Kanaal {name}',
    newPin: 'Een nieuwe poort ({name})',
    doLink: 'Apparaat koppelen',
    cancel: 'Annuleren',
    linked: '{device} is gekoppeld aan {place}.',
    unlink: 'Ontkoppelen',
    unlinked: '{device} is ontkoppeld.',
    noRight: 'Apparaten koppelen vraagt het recht SENSORS.',
    notLinked: 'niet gekoppeld',
  },
);

interface Channel {
  name: unknown;
  defaultPinName?: string;
}
interface ClaimedRow {
  device: { hashId: string; userFacingIdentifier: string; lastOnlineAt: string | null };
  deviceType: { hashId: string; name: string; channels: Channel[] };
  pinGroup: PinGroup | null;
}

const channelName = (c: Channel, i: number) => (typeof c.name === 'string' ? c.name : (c.defaultPinName ?? String(i)));

export default function Claim({ query }: PageProps) {
  const [tick, setTick] = useState(0);
  const [tokens, setTokens] = useState('');
  const [status, setStatus] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [linking, setLinking] = useState<ClaimedRow | null>(null);
  const devices = useAsync(() => findAll<ClaimedRow>('/device/', { rowsPerPage: 100 }, 500), [tick]);
  const allowed = hasRight('SENSORS');
  const claim = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setStatus('');
    try {
      const list = tokens
        .split(/\s+/)
        .map((s) => s.trim())
        .filter(Boolean);
      const answer = await api<{ devices: { hashId: string; userFacingIdentifier: string }[] }>('POST', '/device/claim', { body: { claimTokens: list } });
      setTokens('');
      setStatus(t('claimed', { list: answer.devices.map((d) => d.userFacingIdentifier).join(', ') }));
      setTick((n) => n + 1);
    } catch (err) {
      setError(err);
    }
  };
  const unlink = async (row: ClaimedRow) => {
    setError(null);
    try {
      await api('POST', `/device/${row.device.hashId}/unlink`);
      setStatus(t('unlinked', { device: row.device.userFacingIdentifier }));
      setTick((n) => n + 1);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      {!allowed ? <p class="notice">{t('noRight')}</p> : null}
      {status ? (
        <p role="status" class="notice">
          {status}
        </p>
      ) : null}
      <ErrorBox error={error} />
      <form class="card" onSubmit={claim} aria-labelledby="claim-heading">
        <h2 id="claim-heading">{t('claim')}</h2>
        <Field label={t('tokens')} hint={t('tokensHint')}>
          {(id) => <textarea id={id} name="claimTokens" value={tokens} onInput={(e) => setTokens((e.target as HTMLTextAreaElement).value)} />}
        </Field>
        <button type="submit" class="primary" disabled={!allowed || tokens.trim() === ''}>
          {t('doClaim')}
        </button>
      </form>
      {linking ? (
        <LinkForm
          row={linking}
          preselect={query.get('pinGroupHashId')}
          onDone={(message) => {
            setLinking(null);
            setStatus(message);
            setTick((n) => n + 1);
          }}
          onCancel={() => setLinking(null)}
        />
      ) : null}
      <div class="card" aria-labelledby="devices-heading">
        <h2 id="devices-heading">{t('devices')}</h2>
        <ErrorBox error={devices.error} onRetry={devices.reload} />
        {devices.loading && !devices.data ? <Loading /> : null}
        {devices.data && devices.data.length === 0 ? <p class="muted">{t('none')}</p> : null}
        {devices.data && devices.data.length > 0 ? (
          <Table
            caption={t('devices')}
            rows={devices.data}
            rowKey={(r) => r.device.hashId}
            columns={[
              { title: t('device'), cell: (r) => r.device.userFacingIdentifier },
              { title: t('type'), cell: (r) => r.deviceType.name },
              {
                title: t('place'),
                cell: (r) => (r.pinGroup ? <a href={`#/pin-groups/${r.pinGroup.hashId}`}>{r.pinGroup.name}</a> : <span class="muted">{t('notLinked')}</span>),
              },
              { title: t('lastContact'), cell: (r) => (r.device.lastOnlineAt ? formatDate(r.device.lastOnlineAt) : t('never')) },
              {
                title: '',
                cell: (r) =>
                  r.pinGroup ? (
                    <button type="button" disabled={!allowed} onClick={() => void unlink(r)} aria-label={`${t('unlink')} ${r.device.userFacingIdentifier}`}>
                      {t('unlink')}
                    </button>
                  ) : (
                    <button type="button" disabled={!allowed} onClick={() => setLinking(r)} aria-label={`${t('link')} ${r.device.userFacingIdentifier}`}>
                      {t('link')}
                    </button>
                  ),
              },
            ]}
          />
        ) : null}
      </div>
    </section>
  );
}

function LinkForm({
  row,
  preselect,
  onDone,
  onCancel,
}: {
  row: ClaimedRow;
  preselect: string | null;
  onDone: (message: string) => void;
  onCancel: () => void;
}) {
  const [pinGroupHashId, setPinGroupHashId] = useState(preselect ?? '');
  const [mapping, setMapping] = useState<string[]>(() => row.deviceType.channels.map(() => ''));
  const [error, setError] = useState<unknown>(null);
  const groups = useAsync(() => findAll<{ pinGroup: PinGroup }>('/graph/pin-group', { rowsPerPage: 100 }, 1000), []);
  const detail = useAsync(
    async (signal) => (pinGroupHashId ? api<{ pinGroup: PinGroup; pins: { pin: Pin }[] }>('GET', `/graph/pin-group/${pinGroupHashId}`, { signal }) : null),
    [pinGroupHashId],
  );
  // each channel to the pin of the same name, when the pin group has one
  useEffect(() => {
    const pins = detail.data?.pins ?? [];
    setMapping(row.deviceType.channels.map((c, i) => pins.find((p) => p.pin.name === (c.defaultPinName ?? channelName(c, i)))?.pin.hashId ?? ''));
  }, [detail.data]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      await api('POST', `/device/${row.device.hashId}/link`, {
        body: { pinGroupHashId, channelMapping: row.deviceType.channels.map((_, i) => ({ channel: i, pinHashId: mapping[i] || null })) },
      });
      onDone(t('linked', { device: row.device.userFacingIdentifier, place: detail.data?.pinGroup.name ?? pinGroupHashId }));
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="card link-form" onSubmit={submit} aria-labelledby="link-heading">
      <h2 id="link-heading">{t('linkTitle', { device: row.device.userFacingIdentifier })}</h2>
      <ErrorBox error={groups.error ?? detail.error} />
      <Field label={t('pinGroup')}>
        {(id) => (
          <select id={id} name="pinGroup" value={pinGroupHashId} onChange={(e) => setPinGroupHashId((e.target as HTMLSelectElement).value)}>
            <option value="">{t('choose')}</option>
            {/* selected as well as the select's value: the options come after the value was set */}
            {(groups.data ?? []).map((g) => (
              <option key={g.pinGroup.hashId} value={g.pinGroup.hashId} selected={g.pinGroup.hashId === pinGroupHashId}>
                {g.pinGroup.name}
              </option>
            ))}
          </select>
        )}
      </Field>
      {pinGroupHashId && detail.data
        ? row.deviceType.channels.map((c, i) => (
            <Field key={i} label={t('channel', { name: channelName(c, i) })}>
              {(id) => (
                <select
                  id={id}
                  name={`channel-${i}`}
                  value={mapping[i]}
                  onChange={(e) => {
                    const v = (e.target as HTMLSelectElement).value;
                    setMapping((m) => m.map((x, j) => (j === i ? v : x)));
                  }}
                >
                  <option value="">{t('newPin', { name: c.defaultPinName ?? channelName(c, i) })}</option>
                  {detail.data!.pins.map((p) => (
                    <option key={p.pin.hashId} value={p.pin.hashId} selected={p.pin.hashId === mapping[i]}>
                      {p.pin.name}
                    </option>
                  ))}
                </select>
              )}
            </Field>
          ))
        : null}
      <ErrorBox error={error} />
      <div class="actions">
        <button type="submit" class="primary" disabled={!pinGroupHashId}>
          {t('doLink')}
        </button>
        <button type="button" onClick={onCancel}>
          {t('cancel')}
        </button>
      </div>
    </form>
  );
}
