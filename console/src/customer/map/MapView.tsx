// The environment's map: MapLibre GL drawing the service's own vector tiles (GET /graph/tiles/{z}/{x}/{y}, layers
// pinGroups, edges; src/monitoring/tiles/); without a deployment's base map no request leaves for a tile server.
//
// - MapLibre is loaded only here (dynamic import), its worker from our own origin (worker-src 'self').
// - Tile requests carry Api-Version and Environment-Hash-Id (transformRequest); the session cookie goes along
//   (same origin), and the CSRF header too, harmlessly.
// - Pin groups are drawn as a symbol per symbolKey (a shape computed here as a distance field: no sprite sheet to
//   fetch), coloured by the level of their open issues (the tiles' `level`: 0 none, 1 serious, 2 critical); edges as
//   lines coloured the same way. A map layer's `style.color` (when its style is an object naming one) outlines its
//   pins (the symbol's halo).
// - The first render is short on layers: each kind of layer is a shader program that software GL (headless
//   Chromium) compiles for 0.2-1.5 s. No background layer (the frame's CSS background shows through the
//   transparent canvas), the outline is the symbol's halo rather than a circle layer beneath it, no fade.
// - Dense areas: the tiles are generalised on the server (past 2000 pin groups in a tile they come as clusters per
//   cell of a 16 × 16 grid, with pointCount and their highest level). Client-side clustering would need all the
//   points as GeoJSON, which a 100,000-pin-group environment cannot send; so clusters are the server's, drawn as
//   circles sized by pointCount (no count label: text needs glyphs from a font server, which we do not use).
// - Fitted to the environment's boundingBox.
// - A base map only when the deployment names one (MAP_STYLE_URL, read from GET /console/config): MapLibre loads that
//   style and draws the environment's layers above its own; the service's CSP then allows that style's origin.
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
  {
    label: 'Map of the pin groups',
    layers: 'Map layers',
    legend: 'Open issues',
    none: 'none',
    serious: 'serious',
    critical: 'critical',
    cluster: 'several pin groups',
  },
  {
    label: 'Kaart van de locaties',
    layers: 'Kaartlagen',
    legend: 'Open meldingen',
    none: 'geen',
    serious: 'ernstig',
    critical: 'kritiek',
    cluster: 'meerdere locaties',
  },
);

/** MapLibre's chunk, asked for once: as soon as this module is evaluated (with the page's own chunk), not after its first render. */
let mapLibre: Promise<typeof import('./maplibre.ts')> | null = null;
const loadMapLibre = () => (mapLibre ??= import('./maplibre.ts'));
void loadMapLibre().catch(() => {
  mapLibre = null;
});

/** The deployment's base map (GET /console/config: MAP_STYLE_URL), asked for once, beside MapLibre's chunk. */
let consoleConfig: Promise<{ mapStyleUrl: string | null }> | null = null;
const loadConsoleConfig = () =>
  (consoleConfig ??= fetch('/console/config')
    .then((r) => (r.ok ? (r.json() as Promise<{ mapStyleUrl: string | null }>) : { mapStyleUrl: null }))
    .catch(() => {
      consoleConfig = null;
      return { mapStyleUrl: null };
    }));
void loadConsoleConfig();

export interface MapLayer {
  key: string;
  name: unknown;
  style?: unknown;
  namedStyle?: string | null;
}

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

const POLYGONS: Record<Exclude<(typeof SHAPES)[number], 'circle'>, [number, number][]> = {
  square: [
    [6, 6],
    [26, 6],
    [26, 26],
    [6, 26],
  ],
  diamond: [
    [16, 3],
    [29, 16],
    [16, 29],
    [3, 16],
  ],
  triangle: [
    [16, 4],
    [29, 27],
    [3, 27],
  ],
};

/**
 * The shape of a symbolKey as a signed distance field (icon-color colours it): alpha 192 on the edge, more inside.
 * Computed here, not drawn on a canvas: reading a canvas back (getImageData) costs a GPU readback, which took 0.9 s
 * of the first render in headless Chromium's software GL.
 */
function symbolImage(key: string): { width: number; height: number; data: Uint8Array } {
  const size = 32;
  const shape = shapeOf(key);
  const data = new Uint8Array(size * size * 4);
  const polygon = shape === 'circle' ? null : POLYGONS[shape];
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const px = x + 0.5;
      const py = y + 0.5;
      let d: number;
      if (!polygon) d = 11 - Math.hypot(px - 16, py - 16);
      else {
        // convex and clockwise on screen: the distance to the nearest edge, positive inside
        d = Infinity;
        for (let i = 0; i < polygon.length; i++) {
          const [ax, ay] = polygon[i];
          const [bx, by] = polygon[(i + 1) % polygon.length];
          const len = Math.hypot(bx - ax, by - ay);
          d = Math.min(d, ((px - ax) * (by - ay) - (py - ay) * (bx - ax)) / -len);
        }
      }
      const o = (y * size + x) * 4;
      data[o] = data[o + 1] = data[o + 2] = 255;
      data[o + 3] = Math.max(0, Math.min(255, Math.round(192 + d * 32)));
    }
  }
  return { width: size, height: size, data };
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
  const layers = environmentSetting<MapLayer[]>('mapLayers') ?? [{ key: 'default', name: 'Default' }];
  const [shown, setShown] = useState<string[]>(() => layers.map((l) => l.key));
  const env = session.value?.environment;

  useEffect(() => {
    let cancelled = false;
    let map: MapLibreMap | null = null;
    (async () => {
      // marks for the bench (bench/map.ts) and a profile: where the first render's time goes
      performance.mark('gridgate:map-import');
      const [{ maplibregl }, { mapStyleUrl }] = await Promise.all([loadMapLibre(), loadConsoleConfig()]);
      performance.mark('gridgate:map-imported');
      if (cancelled || !container.current || !env) return;
      const colors = [cssColor('--success', '#2e7d32'), cssColor('--warning', '#b26a00'), cssColor('--error', '#c62828')];
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
          gridgate: {
            type: 'vector',
            tiles: [
              tileUrl(
                layers.map((l) => l.key),
                version,
              ),
            ],
            minzoom: 0,
            maxzoom: 22,
          },
        },
        layers: [
          {
            id: 'edges',
            type: 'line',
            source: 'gridgate',
            'source-layer': 'edges',
            filter: onlyIssues as never,
            paint: {
              'line-color': ['match', ['coalesce', ['get', 'level'], 0], 2, colors[2], 1, colors[1], line] as never,
              'line-width': ['interpolate', ['linear'], ['zoom'], 4, 1, 16, 4],
            },
          },
          {
            id: 'clusters',
            type: 'circle',
            source: 'gridgate',
            'source-layer': 'pinGroups',
            filter: ['all', ['has', 'cluster'], onlyIssues] as never,
            paint: {
              'circle-color': levelColor(colors) as never,
              'circle-opacity': 0.75,
              'circle-radius': ['interpolate', ['linear'], ['coalesce', ['get', 'pointCount'], 2], 2, 8, 50, 14, 500, 20, 5000, 28],
              'circle-stroke-color': fg,
              'circle-stroke-width': 1,
            },
          },
          {
            id: 'pin-groups',
            type: 'symbol',
            source: 'gridgate',
            'source-layer': 'pinGroups',
            filter: ['all', ['!', ['has', 'cluster']], onlyIssues] as never,
            layout: {
              'icon-image': ['concat', 'symbol:', ['coalesce', ['get', 'symbolKey'], 'default']] as never,
              'icon-size': ['interpolate', ['linear'], ['zoom'], 2, 0.3, 16, 0.6],
              'icon-allow-overlap': true,
              'icon-ignore-placement': true,
            },
            // the outline (a map layer's colour) is the shape's own halo: its image is a distance field
            paint: { 'icon-color': levelColor(colors) as never, 'icon-halo-color': halo as never, 'icon-halo-width': 1.5 },
          },
        ],
      };
      const box = environmentSetting<{ coordinates?: [number, number][] } | null>('boundingBox');
      const bounds =
        box?.coordinates && box.coordinates.length >= 2 ? ([box.coordinates[0], box.coordinates[1]] as [[number, number], [number, number]]) : null;
      map = new maplibregl.Map({
        container: container.current,
        attributionControl: false,
        dragRotate: false,
        pitchWithRotate: false,
        // a deployment's base map: MapLibre loads its style, and the environment's source and layers go on top of it
        ...(mapStyleUrl
          ? {
              style: mapStyleUrl,
              transformStyle: (_previous, next) => ({ ...next!, sources: { ...next!.sources, ...style.sources }, layers: [...next!.layers, ...style.layers] }),
            }
          : { style }),
        // fitted to the bounding box from the start (no first frame elsewhere), and symbols shown at once: a fade is
        // frames to draw before the map is idle, each 0.1-0.3 s in software GL
        ...(bounds ? { bounds, fitBoundsOptions: { padding: 40, maxZoom: 16 } } : { center: [5.3, 52.1] as [number, number], zoom: 1 }),
        maxZoom: 20,
        fadeDuration: 0,
        transformRequest: (url) =>
          url.startsWith(`${location.origin}/graph/tiles/`)
            ? { url, headers: { 'Api-Version': String(API_VERSION), 'Environment-Hash-Id': env.hashId, 'X-Gridgate-Console': '1' }, credentials: 'same-origin' }
            : { url },
      });
      mapRef.current = map;
      performance.mark('gridgate:map-created');
      (window as unknown as { __gridgateMap?: MapLibreMap }).__gridgateMap = map;
      map.addControl(new maplibregl.NavigationControl({ showCompass: false }), 'top-right');
      // A symbol's image is made when a tile first needs it, by the resolver MapLibre awaits before it answers the
      // tile's worker. Not in a 'styleimagemissing' listener: MapLibre fires that event after it has answered, so the
      // tile that first needed the image was laid out without it and its pins were not drawn until the tile was asked
      // for again (on the issues' map, every new issue's pin group whose shape the map had not drawn yet).
      map.setMissingStyleImageResolver((id) => {
        if (!id.startsWith('symbol:') || map!.hasImage(id)) return;
        map!.addImage(id, symbolImage(id.slice('symbol:'.length)), { sdf: true });
      });
      map.on('error', (e) => {
        // a tile the service refused shows as a message, not a blank map
        if (e.error && !cancelled) setError(new Error(e.error.message));
      });
      map.once('load', () => {
        performance.mark('gridgate:map-load');
        if (!cancelled) setLoaded(true);
      });
      map.once('idle', () => performance.mark('gridgate:map-idle'));
      const open = (e: MapMouseEvent & { features?: GeoJSONFeature[] }) => {
        const f = e.features?.[0];
        const hashId = f?.properties?.hashId;
        if (typeof hashId === 'string') navigate(`/pin-groups/${hashId}`);
      };
      map.on('click', 'pin-groups', open);
      map.on('click', 'clusters', (e) => map!.easeTo({ center: e.lngLat, zoom: map!.getZoom() + 2 }));
      for (const id of ['pin-groups', 'clusters']) {
        map.on('mouseenter', id, () => {
          map!.getCanvas().style.cursor = 'pointer';
        });
        map.on('mouseleave', id, () => {
          map!.getCanvas().style.cursor = '';
        });
      }
    })().catch((err: unknown) => {
      if (!cancelled) setError(err);
    });
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
    const url = tileUrl(
      layers.map((l) => l.key),
      version,
    );
    // A tile whose load is under way keeps that load's answer, which may predate the change: MapLibre re-parses it
    // when the load ends and asks for nothing new (VectorTileSource.loadTile on a 'loading' tile). So when tiles were
    // loading, they are all asked for once more as soon as the source has loaded.
    const loading = !map.isSourceLoaded('gridgate');
    source?.setTiles?.([url]);
    if (!loading) return;
    const settled = (e: { sourceId?: string }) => {
      if (e.sourceId !== 'gridgate' || !map.isSourceLoaded('gridgate')) return;
      map.off('sourcedata', settled);
      source?.setTiles?.([`${url}&again=1`]);
    };
    map.on('sourcedata', settled);
    return () => {
      map.off('sourcedata', settled);
    };
  }, [version, loaded]);

  // light or dark: the same layers in the scheme's colours (the CSS variables have changed by now)
  const dark = scheme.value === 'dark';
  useEffect(() => {
    const map = mapRef.current;
    if (!map || !loaded) return;
    const colors = [cssColor('--success', '#2e7d32'), cssColor('--warning', '#b26a00'), cssColor('--error', '#c62828')];
    const fg = cssColor('--fg', '#111');
    map.setPaintProperty('edges', 'line-color', ['match', ['coalesce', ['get', 'level'], 0], 2, colors[2], 1, colors[1], cssColor('--muted', '#666')]);
    map.setPaintProperty('clusters', 'circle-color', levelColor(colors) as never);
    map.setPaintProperty('clusters', 'circle-stroke-color', fg);
    map.setPaintProperty('pin-groups', 'icon-color', levelColor(colors) as never);
    const halo = map.getPaintProperty('pin-groups', 'icon-halo-color');
    if (typeof halo === 'string') map.setPaintProperty('pin-groups', 'icon-halo-color', fg);
  }, [dark, loaded]);

  // map layers switched on and off
  useEffect(() => {
    const map = mapRef.current;
    if (!map || !loaded) return;
    const inLayers = ['in', ['get', 'mapLayer'], ['literal', shown]];
    const onlyIssues = issuesOnly ? ['>', ['coalesce', ['get', 'level'], 0], 0] : true;
    map.setFilter('edges', ['all', inLayers, onlyIssues] as never);
    map.setFilter('pin-groups', ['all', ['!', ['has', 'cluster']], inLayers, onlyIssues] as never);
  }, [shown, loaded]);

  return (
    <div class="map-view">
      {error ? <ErrorBox error={error} /> : null}
      <div class="map-frame" style={{ height }}>
        <div ref={container} class="map-canvas" role="region" aria-label={t('label')} data-loaded={loaded ? 'true' : 'false'} />
        {!loaded && !error ? (
          <div class="map-loading">
            <Loading />
          </div>
        ) : null}
      </div>
      <div class="map-footer">
        <ul class="map-legend" aria-label={t('legend')}>
          <li>
            <span class="dot level-0" aria-hidden="true" />
            {t('none')}
          </li>
          <li>
            <span class="dot level-1" aria-hidden="true" />
            {t('serious')}
          </li>
          <li>
            <span class="dot level-2" aria-hidden="true" />
            {t('critical')}
          </li>
          <li>
            <span class="dot cluster" aria-hidden="true" />
            {t('cluster')}
          </li>
        </ul>
        {layers.length > 1 ? (
          <fieldset class="map-layers">
            <legend>{t('layers')}</legend>
            {layers.map((l) => (
              <label key={l.key}>
                <input
                  type="checkbox"
                  checked={shown.includes(l.key)}
                  onChange={(e) => {
                    const on = (e.target as HTMLInputElement).checked;
                    setShown((s) => (on ? [...s, l.key] : s.filter((k) => k !== l.key)));
                  }}
                />
                {translated(l.name) || l.key}
              </label>
            ))}
          </fieldset>
        ) : null}
      </div>
    </div>
  );
}
