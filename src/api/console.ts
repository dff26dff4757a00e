// The browser console (console/, built by Vite into dist/console) served on the API port at /: index.html
// and its hashed assets, read once at start and kept gzipped in memory. Every answer carries a strict
// Content-Security-Policy (no inline or foreign script, no framing, no request to another host).
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../app/context.ts';

export const CONSOLE_DIR = fileURLToPath(new URL('../../dist/console', import.meta.url));

/**
 * style-src allows inline styles: the code editor (Monaco) and the map (MapLibre) set styles from script.
 * Scripts come from this origin only; workers too, or from blob: URLs the map makes of its own bundled worker.
 * With a base map (MAP_STYLE_URL), its style's origin may be fetched from (connect-src: the style, its tiles, glyphs
 * and sprite sheet's JSON) and drawn from (img-src: the sprite sheet); nothing else leaves for another host.
 */
export function contentSecurityPolicy(mapStyleUrl: string | null = null): string {
  const base = mapStyleUrl ? ` ${new URL(mapStyleUrl).origin}` : '';
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    `img-src 'self' data: blob:${base}`,
    "font-src 'self' data:",
    "worker-src 'self' blob:",
    "child-src 'self' blob:",
    `connect-src 'self'${base}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "object-src 'none'",
  ].join('; ');
}

/** The policy without a base map. */
export const CONTENT_SECURITY_POLICY = contentSecurityPolicy();

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ttf': 'font/ttf',
  '.woff2': 'font/woff2',
  '.wasm': 'application/wasm',
  '.map': 'application/json',
};

interface Asset {
  body: Buffer;
  gzip: Buffer | null;
  type: string;
}

async function walk(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const rel = prefix + entry.name;
    if (entry.isDirectory()) out.push(...(await walk(path.join(dir, entry.name), `${rel}/`)));
    else out.push(rel);
  }
  return out;
}

/** The built console's files by URL path; empty when it was not built. */
export async function loadConsole(dir = CONSOLE_DIR): Promise<Map<string, Asset>> {
  const assets = new Map<string, Asset>();
  let files: string[];
  try {
    files = await walk(dir);
  } catch {
    return assets;
  }
  for (const rel of files) {
    // a build running beside this start may have replaced the file: it is left out rather than failing the start
    const body = await readFile(path.join(dir, rel)).catch(() => null);
    if (body === null) continue;
    const type = TYPES[path.extname(rel)] ?? 'application/octet-stream';
    const compressible = /^(text|application\/(json|wasm)|image\/svg)/.test(type) && body.length > 1024;
    assets.set(`/${rel}`, { body, gzip: compressible ? gzipSync(body, { level: 9 }) : null, type });
  }
  return assets;
}

function securityHeaders(reply: FastifyReply, policy: string): FastifyReply {
  return reply
    .header('content-security-policy', policy)
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cross-origin-opener-policy', 'same-origin');
}

function send(request: FastifyRequest, reply: FastifyReply, policy: string, asset: Asset, cache: string) {
  securityHeaders(reply, policy).header('cache-control', cache).header('content-type', asset.type).header('vary', 'accept-encoding');
  const accepts = String(request.headers['accept-encoding'] ?? '');
  if (asset.gzip && /\bgzip\b/.test(accepts)) return reply.header('content-encoding', 'gzip').send(asset.gzip);
  return reply.send(asset.body);
}

const NOT_BUILT =
  '<!doctype html><html lang="en"><meta charset="utf-8"><title>gridgate</title><h1>The console is not built</h1>' +
  '<p>Run <code>npm run build:console</code> (npm start does it when a console source changed). The REST API works without it.</p></html>';

/** What the console needs of the service's settings before anyone signs in (GET /console/config). */
export interface ConsoleConfig {
  /** MAP_STYLE_URL: the MapLibre style the map draws under the environment's own layers; null: no base map */
  mapStyleUrl: string | null;
}

export async function consoleRoutes(app: FastifyInstance, ctx: Pick<AppContext, 'config'>): Promise<void> {
  const assets = await loadConsole();
  const policy = contentSecurityPolicy(ctx.config.mapStyleUrl);
  const config = { apiVersion: false, auth: 'none' as const };
  app.get('/', { config, schema: { hide: true } }, async (request, reply) => {
    const index = assets.get('/index.html');
    if (!index) return securityHeaders(reply, policy).status(503).header('content-type', 'text/html; charset=utf-8').send(NOT_BUILT);
    // the page names its assets by content hash: it is asked again each time, they are kept for good
    return send(request, reply, policy, index, 'no-cache');
  });
  app.get('/assets/*', { config, schema: { hide: true } }, async (request, reply) => {
    const asset = assets.get(request.url.split('?')[0]);
    if (!asset) return reply.status(404).send({ key: 'not_found_error', message: `No console asset ${request.url.split('?')[0]}` });
    return send(request, reply, policy, asset, 'public, max-age=31536000, immutable');
  });
  // the deployment's settings the console's pages read (no secret: the same for everyone, asked before sign-in);
  // described in docs/console.md, not in the REST interface's OpenAPI (it is the console's, not the SDK's)
  const answer: ConsoleConfig = { mapStyleUrl: ctx.config.mapStyleUrl };
  app.get('/console/config', { config, schema: { hide: true } }, async (_request, reply) =>
    securityHeaders(reply, policy).header('cache-control', 'no-cache').send(answer),
  );
}
