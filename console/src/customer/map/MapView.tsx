// The environment's map: MapLibre GL drawing the service's own vector tiles (GET /graph/tiles/{z}/{x}/{y}, layers
// pinGroups, edges; src/monitoring/tiles/) with no base map, so no request leaves for a tile server.
//
// - MapLibre is loaded only here (dynamic import), its worker from our own origin (worker-src 'self').
// - Tile requests carry Api-Version and Environment-Hash-Id (transformRequest); the session cookie goes along
//   (same origin), and the CSRF header too, harmlessly.
// - Pin groups are drawn as a symbol per symbolKey (a shape made here on a canvas: no sprite sheet to fetch),
//   coloured by the level of their open issues (the tiles' `level`: 0 none, 1 serious, 2 critical); edges as lines
//   coloured the same way. A map layer's `style.color` (when its style is an object naming one) outlines its pins.
// - Dense areas: the tiles are generalised on the server (past 2000 pin groups in a tile they come as clusters per
//   cell of a 16 × 16 grid, with pointCount and their highest level). Client-side clustering would need all the
//   points as GeoJSON, which a 100,000-pin-group environment cannot send; so clusters are the server's, drawn as
//   circles sized by pointCount (no count label: text needs glyphs from a font server, which we do not use).
// - Fitted to the environment's boundingBox.
// - The map instance is on window.__gridgateMap for the browser tests (they query features through MapLibre's
//   own API); nothing of the page reads it.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { GeoJSONFeature, Map as MapLibreMap, MapMouseEvent, StyleSpecification } from 'maplibre-gl';
import { API_VERSION } from '../../api.ts';
import { messages, translated } from '../../i18n.ts';
import { navigate } from '../../router.ts';
import { environmentSetting, session } from '../../session.ts';
import { scheme } from '../../shell/theme.ts';
import { ErrorBox, Loading } from '../../ui.tsx';
import './map.css';

const t = messages(
  { label: 'Map of the pin groups', layers: 'Map layers', legend: 'Open issues', none: 'none', serious: 'serious', critical: 'critical', cluster: 'several pin groups' },
  { label: 'Kaart van de locaties', layers: 'Kaartlagen', legend: 'Open meldingen', none: 'geen', serious: 'ernstig', critical: 'kritiek', cluster: 'meerdere locaties' },
);

export interface MapLayer { key: string; name: unknown; style?: unknown; namedStyle?: string | null }

/** The tiles' URL template for these map layers (the source's tiles; MapLibre fills in z, x, y). */
export function tileUrl(mapLayers: string[], version = 0): string {
  const q = mapLayers.map((k, i) => `mapLayers%5B${i}%5D=${encodeURIComponent(k)}`);
  if (version > 0) q.push(`v=${version}`);
  return `${location.origin}/graph/tiles/{z}/{x}/{y}?${q.join('&')}`;
}

function cssColor(name: string, fallback: string): string {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

/** The shapes a symbolKey is drawn as: the same key always the same shape. */
const SHAPES = ['circle', 'square', 'diamond', 'triangle'] as const;
function shapeOf(key: string): (typeof SHAPES)[number] {
  let h = 0;
  for (const ch of key) h = (h * 31 + ch.charCodeAt(0)) | 0;
  return SHAPES[Math.abs(h) % SHAPES.length];
}

/** A signed-distance-field-free white shape (coloured by icon-color as an SDF image) for a symbolKey. */
function symbolImage(key: string): { width: number; height: number; data: Uint8Array } {
  const size = 32;
  const canvas = document.createElement('canvas');
  canvas.width = size;
  canvas.height = size;
  const g = canvas.getContext('2d')!;
  g.fillStyle = '#fff';
  g.beginPath();
  const shape = shapeOf(key);
  if (shape === 'circle') g.arc(16, 16, 11, 0, Math.PI * 2);
  else if (shape === 'square') g.rect(6, 6, 20, 20);
  else if (shape === 'diamond') { g.moveTo(16, 3); g.lineTo(29, 16); g.lineTo(16, 29); g.lineTo(3, 16); g.closePath(); }
  else { g.moveTo(16, 4); g.lineTo(29, 27); g.lineTo(3, 27); g.closePath(); }
  g.fill();
  const img = g.getImageData(0, 0, size, size);
  return { width: size, height: size, data: new Uint8Array(img.data.buffer) };
}

export interface MapViewProps {
  /** only pin groups and edges with an open issue (the issue list's map) */
  issuesOnly?: boolean;
  /** bumped to draw the tiles again (an issue opened or closed) */
  version?: number;
  height?: string;
}

const levelColor = (colors: string[]) => ['match', ['coalesce', ['get', 'level'], 0], 2, colors[2], 1, colors[1], colors[0]];

export function MapView({ issuesOnly = false, version = 0, height = '60vh' }: MapViewProps) {
  const container = useRef<HTMLDivElement>(null);
  const mapRef = useRef<MapLibreMap | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loaded, setLoaded] = useState(false);
  const layers = (environmentSetting<MapLayer[]>('mapLayers') ?? [{ key: 'default', name: 'Default' }]);
  const [shown, setShown] = useState<string[]>(() => layers.map((l) => l.key));
  const env = session.value?.environment;

  useEffect(() => {
    let cancelled = false;
    let map: MapLibreMap | null = null;
    (async () => {
      const { maplibregl } = await import('./maplibre.ts');
      if (cancelled || !container.current || !env) return;
      const colors = [cssColor('--success', '#2e7d32'), cssColor('--warning', '#b26a00'), cssColor('--error', '#c62828')];
      const background = cssColor('--panel', '#f4f4f4');
      const line = cssColor('--muted', '#666');
      const fg = cssColor('--fg', '#111');
      const onlyIssues = issuesOnly ? ['>', ['coalesce', ['get', 'level'], 0], 0] : true;
      const strokeOfLayer: unknown[] = ['match', ['get', 'mapLayer']];
      for (const l of layers) {
        const c = l.style && typeof l.style === 'object' ? (l.style as { color?: unknown }).color : undefined;
        if (typeof c === 'string') strokeOfLayer.push(l.key, c);
      }
      strokeOfLayer.push(fg);
      const halo = strokeOfLayer.length > 3 ? strokeOfLayer : fg;
      const style: StyleSpecification = {
        version: 8,
        sources: {
          gridgate: { type: 'vector', tiles: [tileUrl(layers.map((l) => l.key), version)], minzoom: 0, maxzoom: 22 },
        },
        layers: [
          { id: 'background', type: 'background', paint: { 'background-color': background } },
          {
            id: 'edges', type: 'line', source: 'gridgate', 'source-layer': 'edges', filter: onlyIssues as never,
            paint: { 'line-color': ['match', ['coalesce', ['get', 'level'], 0], 2, colors[2], 1, colors[1], line] as never, 'line-width': ['interpolate', ['linear'], ['zoom'], 4, 1, 16, 4] },
          },
          {
            id: 'clusters', type: 'circle', source: 'gridgate', 'source-layer': 'pinGroups', filter: ['all', ['has', 'cluster'], onlyIssues] as never,
            paint: {
              'circle-color': levelColor(colors) as never, 'circle-opacity': 0.75,
              'circle-radius': ['interpolate', ['linear'], ['coalesce', ['get', 'pointCount'], 2], 2, 8, 50, 14, 500, 20, 5000, 28],
              'circle-stroke-color': fg, 'circle-stroke-width': 1,
            },
          },
          {
            id: 'pin-group-halo', type: 'circle', source: 'gridgate', 'source-layer': 'pinGroups', filter: ['all', ['!', ['has', 'cluster']], onlyIssues] as never,
            paint: { 'circle-color': halo as never, 'circle-radius': ['interpolate', ['linear'], ['zoom'], 2, 5, 16, 11] },
          },
          {
            id: 'pin-groups', type: 'symbol', source: 'gridgate', 'source-layer': 'pinGroups', filter: ['all', ['!', ['has', 'cluster']], onlyIssues] as never,
            layout: {
              'icon-image': ['concat', 'symbol:', ['coalesce', ['get', 'symbolKey'], 'default']] as never,
              'icon-size': ['interpolate', ['linear'], ['zoom'], 2, 0.3, 16, 0.6], 'icon-allow-overlap': true, 'icon-ignore-placement': true,
            },
            paint: { 'icon-color': levelColor(colors) as never },
          },
        ],
      };
      map = new maplibregl.Map({
        container: container.current, style, attributionControl: false, dragRotate: false, pitchWithRotate: false,
        center: [5.3, 52.1], zoom: 1, maxZoom: 20,
        transformRequest: (url) => (url.startsWith(`${location.origin}/graph/tiles/`)
          ? { url, headers: { 'Api-Version': String(API_VERSION), 'Environment-Hash-Id': env.hashId, 'X-Gridgate-Console': '1' }, credentials: 'same-origin' }
          : { url }),
      });
      mapRef.current = map;
      (window as unknown as { __gridgateMap?: MapLibreMap }).__gridgateMap = map;
      map.addControl(new maplibregl.NavigationControl({ showCompass: false }), 'top-right');
      map.on('styleimagemissing', (e: { id: string }) => {
        if (!e.id.startsWith('symbol:') || map!.hasImage(e.id)) return;
        map!.addImage(e.id, symbolImage(e.id.slice('symbol:'.length)), { sdf: true });
      });
      const box = environmentSetting<{ coordinates?: [number, number][] } | null>('boundingBox');
      if (box?.coordinates && box.coordinates.length >= 2) {
        const [[w, s], [e, n]] = box.coordinates;
        map.fitBounds([[w, s], [e, n]], { padding: 40, maxZoom: 16, animate: false });
      }
      map.on('error', (e) => {
        // a tile the service refused shows as a message, not a blank map
        if (e.error && !cancelled) setError(new Error(e.error.message));
      });
      map.once('load', () => { if (!cancelled) setLoaded(true); });
      const open = (e: MapMouseEvent & { features?: GeoJSONFeature[] }) => {
        const f = e.features?.[0];
        const hashId = f?.properties?.hashId;
        if (typeof hashId === 'string') navigate(`/pin-groups/${hashId}`);
      };
      map.on('click', 'pin-groups', open);
      map.on('click', 'pin-group-halo', open);
      map.on('click', 'clusters', (e) => map!.easeTo({ center: e.lngLat, zoom: map!.getZoom() + 2 }));
      for (const id of ['pin-groups', 'pin-group-halo', 'clusters']) {
        map.on('mouseenter', id, () => { map!.getCanvas().style.cursor = 'pointer'; });
        map.on('mouseleave', id, () => { map!.getCanvas().style.cursor = ''; });
      }
    })().catch((err: unknown) => { if (!cancelled) setError(err); });
    return () => {
      cancelled = true;
      map?.remove();
      mapRef.current = null;
      const w = window as unknown as { __gridgateMap?: MapLibreMap };
      if (w.__gridgateMap === map) delete w.__gridgateMap;
    };
  }, [env?.hashId, issuesOnly]);

  // new tiles when something they show changed (an issue's level): the URL changes, so MapLibre asks again
  useEffect(() => {
    const map = mapRef.current;
    if (!map || version === 0 || !loaded) return;
    const source = map.getSource('gridgate') as { setTiles?: (t: string[]) => void } | undefined;
    source?.setTiles?.([tileUrl(layers.map((l) => l.key), version)]);
    // and once more a little later: a tile drawn while the change was being written may have been answered as before
    const again = setTimeout(() => source?.setTiles?.([`${tileUrl(layers.map((l) => l.key), version)}&again=1`]), 2500);
    return () => clearTimeout(again);
  }, [version, loaded]);

  // light or dark: the same layers in the scheme's colours (the CSS variables have changed by now)
  const dark = scheme.value === 'dark';
  useEffect(() => {
    const map = mapRef.current;
    if (!map || !loaded) return;
    const colors = [cssColor('--success', '#2e7d32'), cssColor('--warning', '#b26a00'), cssColor('--error', '#c62828')];
    const fg = cssColor('--fg', '#111');
    map.setPaintProperty('background', 'background-color', cssColor('--panel', '#f4f4f4'));
    map.setPaintProperty('edges', 'line-color', ['match', ['coalesce', ['get', 'level'], 0], 2, colors[2], 1, colors[1], cssColor('--muted', '#666')]);
    map.setPaintProperty('clusters', 'circle-color', levelColor(colors) as never);
    map.setPaintProperty('clusters', 'circle-stroke-color', fg);
    map.setPaintProperty('pin-groups', 'icon-color', levelColor(colors) as never);
    const halo = map.getPaintProperty('pin-group-halo', 'circle-color');
    if (typeof halo === 'string') map.setPaintProperty('pin-group-halo', 'circle-color', fg);
  }, [dark, loaded]);

  // map layers switched on and off
  useEffect(() => {
    const map = mapRef.current;
    if (!map || !loaded) return;
    const inLayers = ['in', ['get', 'mapLayer'], ['literal', shown]];
    const onlyIssues = issuesOnly ? ['>', ['coalesce', ['get', 'level'], 0], 0] : true;
    map.setFilter('edges', ['all', inLayers, onlyIssues] as never);
    map.setFilter('pin-groups', ['all', ['!', ['has', 'cluster']], inLayers, onlyIssues] as never);
    map.setFilter('pin-group-halo', ['all', ['!', ['has', 'cluster']], inLayers, onlyIssues] as never);
  }, [shown, loaded]);

  return (
    <div class="map-view">
      {error ? <ErrorBox error={error} /> : null}
      <div class="map-frame" style={{ height }}>
        <div ref={container} class="map-canvas" role="region" aria-label={t('label')} data-loaded={loaded ? 'true' : 'false'} />
        {!loaded && !error ? <div class="map-loading"><Loading /></div> : null}
      </div>
      <div class="map-footer">
        <ul class="map-legend" aria-label={t('legend')}>
          <li><span class="dot level-0" aria-hidden="true" />{t('none')}</li>
          <li><span class="dot level-1" aria-hidden="true" />{t('serious')}</li>
          <li><span class="dot level-2" aria-hidden="true" />{t('critical')}</li>
          <li><span class="dot cluster" aria-hidden="true" />{t('cluster')}</li>
        </ul>
        {layers.length > 1 ? (
          <fieldset class="map-layers">
            <legend>{t('layers')}</legend>
            {layers.map((l) => (
              <label key={l.key}>
                <input type="checkbox" checked={shown.includes(l.key)} onChange={(e) => {
                  const on = (e.target as HTMLInputElement).checked;
                  setShown((s) => (on ? [...s, l.key] : s.filter((k) => k !== l.key)));
                }} />
                {translated(l.name) || l.key}
              </label>
            ))}
          </fieldset>
        ) : null}
      </div>
    </div>
  );
}
