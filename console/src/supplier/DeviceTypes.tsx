import { api } from '../api.ts';
import { messages, translated } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { navigate } from '../router.ts';
import { ErrorBox, Loading, PageTitle, Table, useAsync } from '../ui.tsx';

const t = messages(
  { title: 'Device types', name: 'Name', hashId: 'Id' },
  { title: 'Apparaattypes', name: 'Naam', hashId: 'Id' },
);

interface DeviceTypeRow { deviceType: { hashId: string; name: unknown } }

export default function DeviceTypes(_: PageProps) {
  const { data, error, loading, reload } = useAsync((signal) => api<{ rows: DeviceTypeRow[] }>('GET', '/device-type/', { signal, query: { rowsPerPage: 100 } }), []);
  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      <ErrorBox error={error} onRetry={reload} />
      {loading && <Loading />}
      {data && (
        <Table caption={t('title')} rows={data.rows} rowKey={(r) => r.deviceType.hashId} onRow={(r) => navigate(`/device-types/${r.deviceType.hashId}`)}
          columns={[{ title: t('name'), cell: (r) => translated(r.deviceType.name) }, { title: t('hashId'), cell: (r) => <code>{r.deviceType.hashId}</code> }]} />
      )}
    </section>
  );
}
