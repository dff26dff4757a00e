// MapLibre GL, loaded only by the pages that draw a map (import('./maplibre.ts')). Its worker is a file of our own
// build served from our own origin (Vite's ?worker&url: a .js file the console's server types as JavaScript), which the CSP's worker-src 'self' allows; MapLibre would
// otherwise look for it beside its own module, which the bundle does not keep.
import * as maplibregl from 'maplibre-gl';
import workerUrl from 'maplibre-gl/dist/maplibre-gl-worker.mjs?worker&url';
import 'maplibre-gl/dist/maplibre-gl.css';

maplibregl.setWorkerUrl(new URL(workerUrl, location.href).href);
// the worker's script is fetched and compiled while the page creates the map (its WebGL context), not after
maplibregl.prewarm();

export { maplibregl };
