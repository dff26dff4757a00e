// A dashboard's map card (the SDK's analyticsVisualisation `map`: latitude, longitude, colour and tooltip columns of
// the card's rows, on a map layer): a small map, the customer's map (map/MapView.tsx, used as it is) drawing the
// environment's pin groups from the service's tiles, coloured by their open issues, fitted to the environment. The
// card's own rows stay readable below it as a table (a screen reader gets no canvas), with the places it names.
import type { ComponentChildren } from 'preact';
import { formatNumber, messages } from '../../i18n.ts';
import { MapView } from '../map/MapView.tsx';
import './parts.css';

const t = messages({ places: 'Places in the rows: {n}', rows: 'The rows of the map' }, { places: 'Plaatsen in de rijen: {n}', rows: 'De rijen van de kaart' });

export interface MapVisualisation {
  type: 'map';
  latitudeColumnIndex: number;
  longitudeColumnIndex: number;
  colorColumnIndex?: number | null;
  tooltipColumnIndex?: number | null;
  mapLayerKey?: string;
}

const coordinate = (v: unknown, limit: number): number | null => {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
  return Number.isFinite(n) && Math.abs(n) <= limit ? n : null;
};

/** The rows that name a place: a latitude and a longitude within the world. */
export function placesOf(v: MapVisualisation, rows: unknown[][]): { lat: number; lon: number; row: unknown[] }[] {
  return rows.flatMap((row) => {
    const lat = coordinate(row[v.latitudeColumnIndex], 90);
    const lon = coordinate(row[v.longitudeColumnIndex], 180);
    return lat === null || lon === null ? [] : [{ lat, lon, row }];
  });
}

/** The small map of a map card, and its rows (`table`, the card's table) under it. */
export function MapCard({ visualisation, rows, table }: { visualisation: MapVisualisation; rows: unknown[][]; table: ComponentChildren }) {
  const places = placesOf(visualisation, rows);
  return (
    <figure class="map-card" data-places={places.length}>
      <MapView height="16rem" />
      <figcaption class="muted">{t('places', { n: formatNumber(places.length) })}</figcaption>
      <details>
        <summary>{t('rows')}</summary>
        {table}
      </details>
    </figure>
  );
}
