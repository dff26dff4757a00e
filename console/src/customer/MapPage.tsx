// The customer's map (/map): the environment's pin groups and edges from the service's own tiles (map/MapView.tsx),
// and beside it the same places as a list a keyboard and a screen reader can use, searchable, worst issue first.
// A new or closed issue (GET /issue/stream) redraws the tiles and the list.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { ErrorBox, Loading, PageTitle, useAsync } from '../ui.tsx';
import { MapView } from './map/MapView.tsx';
import { LevelBadge, useIssueStream, type PinGroup } from './parts/parts.tsx';
import './parts/parts.css';

const t = messages(
  { title: 'Map', places: 'Pin groups', search: 'Search pin groups', none: 'No pin group matches.', more: 'Showing the first {n}; search to find others.' },
  { title: 'Kaart', places: 'Locaties', search: 'Locaties zoeken', none: 'Geen locatie gevonden.', more: 'De eerste {n} getoond; zoek om andere te vinden.' },
);

const PAGE = 100;

export default function MapPage(_: PageProps) {
  const [search, setSearch] = useState('');
  const [version, setVersion] = useState(0);
  const list = useAsync(
    (signal) =>
      api<{ rows: { pinGroup: PinGroup }[]; nextPageOffset: string | null }>('GET', '/graph/pin-group', {
        query: { rowsPerPage: PAGE, search: search || undefined },
        signal,
      }),
    [search, version],
  );
  useIssueStream(() => setVersion((v) => v + 1));
  const rows = (list.data?.rows ?? []).slice().sort((a, b) => b.pinGroup.level - a.pinGroup.level);
  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      <div class="map-page">
        <MapView version={version} height="70vh" />
        <aside aria-labelledby="places-heading">
          <h2 id="places-heading">{t('places')}</h2>
          <div class="field">
            <label for="place-search">{t('search')}</label>
            <input id="place-search" type="search" value={search} onInput={(e) => setSearch((e.target as HTMLInputElement).value)} />
          </div>
          <ErrorBox error={list.error} onRetry={list.reload} />
          {list.loading && !list.data ? <Loading /> : null}
          {list.data && rows.length === 0 ? <p class="muted">{t('none')}</p> : null}
          <ul class="place-list">
            {rows.map(({ pinGroup }) => (
              <li key={pinGroup.hashId}>
                <a href={`#/pin-groups/${pinGroup.hashId}`}>
                  <span>{pinGroup.name}</span>
                  <LevelBadge level={pinGroup.level} place />
                </a>
              </li>
            ))}
          </ul>
          {list.data?.nextPageOffset ? <p class="muted">{t('more', { n: PAGE })}</p> : null}
        </aside>
      </div>
    </section>
  );
}
