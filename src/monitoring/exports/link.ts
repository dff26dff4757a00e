// Download links of exports: `/file/<hashId>?environment=<environmentHashId>&expires=<unix s>&signature=<hex>`, the
// signature an HMAC-SHA256 (key derived from SECRET_KEY for this use only) of all three. The file is served only
// when the signature holds, the link has not expired and the export is the named environment's: a link cannot be
// moved to another export, environment or expiry, and nobody without SECRET_KEY can make one.

import { createHmac, timingSafeEqual } from 'node:crypto';

export interface DownloadLink {
  hashId: string;
  environmentHashId: string;
  expires: number;
}

const signatureOf = (key: Buffer, l: DownloadLink) => createHmac('sha256', key).update(`${l.hashId}\n${l.environmentHashId}\n${l.expires}`).digest();

/** The path and query of the link (the API's origin goes before it). */
export function downloadPath(key: Buffer, l: DownloadLink): string {
  const q = new URLSearchParams({ environment: l.environmentHashId, expires: String(l.expires), signature: signatureOf(key, l).toString('hex') });
  return `/file/${encodeURIComponent(l.hashId)}?${q}`;
}

/** Whether `signature` (hex) signs the link and the link is unexpired at `nowSeconds`. */
export function linkHolds(key: Buffer, l: DownloadLink, signature: string, nowSeconds: number): boolean {
  if (!Number.isSafeInteger(l.expires) || l.expires <= nowSeconds || !/^[0-9a-f]{64}$/.test(signature)) return false;
  return timingSafeEqual(signatureOf(key, l), Buffer.from(signature, 'hex'));
}
