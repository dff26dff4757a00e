// Devices (/devices): search (device find's `search`: hashId, supplier identifier, user-facing identifier), when
// each was last online, its device type; and adding a device with a pre-shared key (device addWithPsk).
import './device/device.css';
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { messages, translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { navigate } from '../router.ts';
import { Empty, ErrorBox, Field, Loading, PageTitle, TextInput, useAsync } from '../ui.tsx';
import type { DeviceRow, DeviceType } from './device/types.ts';
import { Ago, deviceName, randomHex } from './parts.tsx';

const t = messages(
  {
    title: 'Devices',
    search: 'Search devices',
    searchHint: 'Identifier, user-facing identifier or id',
    identifier: 'Device',
    type: 'Device type',
    lastOnline: 'Last online',
    claimed: 'Claimed by',
    notClaimed: 'not claimed',
    more: 'Show more',
    count: '{n} shown',
    add: 'Add a device with a pre-shared key',
    supplierId: 'Supplier device identifier',
    identity: 'PSK identity',
    identityHint: 'What the device sends in its TLS or DTLS handshake',
    key: 'Pre-shared key (hex)',
    keyHint: 'Keep a copy: it cannot be read back.',
    newKey: 'New random key',
    save: 'Add device',
    added: 'Device added.',
    pick: 'Choose a device type',
    nothing: 'No device matches.',
    caption: 'Devices of this environment',
  },
  {
    title: 'Apparaten',
    search: 'Apparaten zoeken',
    searchHint: 'Identificatie, zichtbare identificatie of id',
    identifier: 'Apparaat',
    type: 'Apparaattype',
    lastOnline: 'Laatst online',
    claimed: 'Geclaimd door',
    notClaimed: 'niet geclaimd',
    more: 'Meer tonen',
    count: '{n} getoond',
    add: 'Een apparaat toevoegen met een pre-shared key',
    supplierId: 'Identificatie van de leverancier',
    identity: 'PSK-identiteit',
    identityHint: 'Wat het apparaat in zijn TLS- of DTLS-handshake stuurt',
    key: 'Pre-shared key (hex)',
    keyHint: 'Bewaar een kopie: de sleutel is niet terug te lezen.',
    newKey: 'Nieuwe willekeurige sleutel',
    save: 'Apparaat toevoegen',
    added: 'Apparaat toegevoegd.',
    pick: 'Kies een apparaattype',
    nothing: 'Geen apparaat gevonden.',
    caption: 'Apparaten van deze omgeving',
  },
);

interface Page {
  rows: DeviceRow[];
  nextPageOffset: string | null;
}

export default function Devices(_: PageProps) {
  const [search, setSearch] = useState('');
  const [wanted, setWanted] = useState('');
  const [more, setMore] = useState<DeviceRow[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [moreError, setMoreError] = useState<unknown>(null);
  // a pause in typing searches, not every key
  useEffect(() => {
    const timer = setTimeout(() => setWanted(search.trim()), 250);
    return () => clearTimeout(timer);
  }, [search]);
  const { data, error, loading, reload } = useAsync(
    async (signal) => {
      const page = await api<Page>('GET', '/device/', { signal, query: { search: wanted || undefined, rowsPerPage: 50, sortBy: 'supplierDeviceIdentifier' } });
      setMore([]);
      setNext(page.nextPageOffset);
      return page;
    },
    [wanted],
  );
  const loadMore = async () => {
    try {
      const page = await api<Page>('GET', '/device/', {
        query: { search: wanted || undefined, rowsPerPage: 50, sortBy: 'supplierDeviceIdentifier', offset: next },
      });
      setMore((m) => [...m, ...page.rows]);
      setNext(page.nextPageOffset);
    } catch (err) {
      setMoreError(err);
    }
  };
  const rows = [...(data?.rows ?? []), ...more];

  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      <div class="filters">
        <TextInput label={t('search')} hint={t('searchHint')} type="search" value={search} onInput={setSearch} name="search" />
      </div>
      <ErrorBox error={error} onRetry={reload} />
      {loading && !data && <Loading />}
      {data &&
        (rows.length === 0 ? (
          <Empty>{t('nothing')}</Empty>
        ) : (
          <table>
            <caption class="sr-only">{t('caption')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('identifier')}</th>
                <th scope="col">{t('type')}</th>
                <th scope="col">{t('lastOnline')}</th>
                <th scope="col">{t('claimed')}</th>
                <th scope="col">Id</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.device.hashId} class="clickable" onClick={() => navigate(`/devices/${r.device.hashId}`)}>
                  <td>
                    <a href={`#/devices/${r.device.hashId}`} onClick={(e) => e.stopPropagation()}>
                      {deviceName(r.device)}
                    </a>
                    {deviceName(r.device) !== r.device.supplierDeviceIdentifier && <div class="muted small">{r.device.supplierDeviceIdentifier}</div>}
                  </td>
                  <td>{translated(r.deviceType.name)}</td>
                  <td>
                    <Ago iso={r.device.lastOnlineAt} />
                  </td>
                  <td>{r.environmentName ?? <span class="muted">{t('notClaimed')}</span>}</td>
                  <td>
                    <code>{r.device.hashId}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
      {data && (
        <p class="muted small" aria-live="polite">
          {t('count', { n: rows.length })}
        </p>
      )}
      {next && (
        <button type="button" onClick={loadMore}>
          {t('more')}
        </button>
      )}
      <ErrorBox error={moreError} />
      <AddDevice onAdded={(hashId) => navigate(`/devices/${hashId}`)} />
    </section>
  );
}

function AddDevice({ onAdded }: { onAdded: (hashId: string) => void }) {
  const [open, setOpen] = useState(false);
  const types = useAsync(
    (signal) => (open ? api<{ rows: { deviceType: DeviceType }[] }>('GET', '/device-type/', { signal, query: { rowsPerPage: 100 } }) : Promise.resolve(null)),
    [open],
  );
  const [supplierId, setSupplierId] = useState('');
  const [typeHashId, setTypeHashId] = useState('');
  const [identity, setIdentity] = useState('');
  const [key, setKey] = useState(() => randomHex(16));
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const answer = await api<{ hashId: string }>('POST', '/device/psk', {
        body: { supplierDeviceIdentifier: supplierId, deviceTypeHashId: typeHashId, psk: key, pskIdentity: identity || supplierId },
      });
      onAdded(answer.hashId);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <details class="panel" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>
        <h2 class="inline-heading">{t('add')}</h2>
      </summary>
      {open && (
        <form onSubmit={submit}>
          <ErrorBox error={types.error} />
          <Field label={t('type')}>
            {(id) => (
              <select id={id} value={typeHashId} required onChange={(e) => setTypeHashId((e.target as HTMLSelectElement).value)}>
                <option value="">{t('pick')}</option>
                {types.data?.rows.map((r) => (
                  <option key={r.deviceType.hashId} value={r.deviceType.hashId}>
                    {translated(r.deviceType.name)}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <TextInput label={t('supplierId')} value={supplierId} onInput={setSupplierId} required name="supplierDeviceIdentifier" />
          <TextInput label={t('identity')} hint={t('identityHint')} value={identity} onInput={setIdentity} name="pskIdentity" />
          <div class="row">
            <TextInput label={t('key')} hint={t('keyHint')} value={key} onInput={setKey} required pattern="([0-9a-fA-F]{2})+" name="psk" />
            <button type="button" onClick={() => setKey(randomHex(16))}>
              {t('newKey')}
            </button>
          </div>
          <ErrorBox error={error} />
          <button type="submit" class="primary" disabled={busy}>
            {t('save')}
          </button>
        </form>
      )}
    </details>
  );
}
