// The console's build: `npm run build:console` (scripts/build-console.mjs runs it when a source is newer than
// the last build). Output in dist/console, served by the API at / (src/api/console.ts).
import { defineConfig } from 'vite';
import preact from '@preact/preset-vite';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/',
  plugins: [preact({ prerender: { enabled: false } })],
  build: {
    outDir: fileURLToPath(new URL('../dist/console', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // the editor and the map are loaded only on the pages that show them (dynamic import())
    chunkSizeWarningLimit: 4096,
    reportCompressedSize: false,
  },
  worker: { format: 'es' },
  server: {
    // `npm run console:dev`: the API of a running `npm start` behind Vite's dev server
    proxy: Object.fromEntries(['/authentication', '/device-type', '/device', '/supplier', '/environment', '/graph', '/pin-group', '/pin', '/issue', '/settings', '/user', '/export', '/chart', '/quantity', '/command', '/report', '/threshold', '/analytics', '/audit']
      .map((p) => [p, 'http://127.0.0.1:8080'])),
  },
});
