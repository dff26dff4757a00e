// The live log page (/live): the environment's supplier activities as they arrive, filtered to a device type or
// a device (?deviceType=…&device=… in the address, so a filtered log can be linked to).
import { api } from '../api.ts';
import { messages, translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { navigate } from '../router.ts';
import { ErrorBox, Field, PageTitle, useAsync } from '../ui.tsx';
import { ActivityLog } from './device/ActivityLog.tsx';
import type { DeviceType } from './device/types.ts';

const t = messages(
  {
    title: 'Live log',
    deviceType: 'Device type',
    all: 'All device types',
    device: 'Device',
    allDevices: 'All devices',
    intro: "Every run of your code as it happens: a device's request, the answer it got, the reports parsed and what failed.",
  },
  {
    title: 'Live log',
    deviceType: 'Apparaattype',
    all: 'Alle apparaattypes',
    device: 'Apparaat',
    allDevices: 'Alle apparaten',
    intro: 'Elke uitvoering van je code terwijl die gebeurt: het verzoek van een apparaat, het antwoord, de geparste rapporten en wat mislukte.',
  },
);

export default function LiveLog({ query }: PageProps) {
  const deviceTypeHashId = query.get('deviceType') || undefined;
  const deviceHashId = query.get('device') || undefined;
  const types = useAsync((signal) => api<{ rows: { deviceType: DeviceType }[] }>('GET', '/device-type/', { signal, query: { rowsPerPage: 100 } }), []);
  const filter = (next: { deviceType?: string; device?: string }) => {
    const q = new URLSearchParams();
    if (next.deviceType) q.set('deviceType', next.deviceType);
    if (next.device) q.set('device', next.device);
    const s = q.toString();
    navigate(s ? `/live?${s}` : '/live');
  };
  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      <p class="muted">{t('intro')}</p>
      <div class="filters">
        <Field label={t('deviceType')}>
          {(id) => (
            <select
              id={id}
              value={deviceTypeHashId ?? ''}
              onChange={(e) => filter({ deviceType: (e.target as HTMLSelectElement).value, device: deviceHashId })}
            >
              <option value="">{t('all')}</option>
              {types.data?.rows.map((r) => (
                <option key={r.deviceType.hashId} value={r.deviceType.hashId}>
                  {translated(r.deviceType.name)}
                </option>
              ))}
            </select>
          )}
        </Field>
        {deviceHashId && (
          <p>
            {t('device')}:{' '}
            <a href={`#/devices/${encodeURIComponent(deviceHashId)}`}>
              <code>{deviceHashId}</code>
            </a>{' '}
            <button type="button" onClick={() => filter({ deviceType: deviceTypeHashId })}>
              {t('allDevices')}
            </button>
          </p>
        )}
      </div>
      <ErrorBox error={types.error} onRetry={types.reload} />
      <ActivityLog deviceTypeHashId={deviceTypeHashId} deviceHashId={deviceHashId} oneDevice={!!deviceHashId} />
    </section>
  );
}
