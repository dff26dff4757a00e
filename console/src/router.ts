// Hash routes (`/#/device-types/abc`): the service serves one page at /, and no console path can shadow an API route.
import { signal } from '@preact/signals';

export const route = signal<string>(currentPath());

function currentPath(): string {
  const hash = location.hash.replace(/^#/, '');
  return hash.startsWith('/') ? hash : '/';
}

addEventListener('hashchange', () => {
  route.value = currentPath();
});

export function navigate(path: string): void {
  if (currentPath() === path) return;
  location.hash = path;
}

/** The path without its query, and the query's parameters. */
export function splitRoute(path: string): { path: string; params: URLSearchParams } {
  const q = path.indexOf('?');
  return q < 0 ? { path, params: new URLSearchParams() } : { path: path.slice(0, q), params: new URLSearchParams(path.slice(q + 1)) };
}

/** Matches `/device-types/:hashId` against a path; the named parts, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split('/');
  const s = path.split('/');
  if (p.length !== s.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(':')) out[p[i].slice(1)] = decodeURIComponent(s[i]);
    else if (p[i] !== s[i]) return null;
  }
  return out;
}
