// Small parts the customer's administration pages share: files in and out of the browser, values as the API
// stores them (significand x 10^orderOfMagnitude), a pin group picker, paging. Every name a tenant wrote is
// rendered as text.
import { useState } from 'preact/hooks';
import { findAll } from '../../api.ts';
import { messages } from '../../i18n.ts';
import { Field, useAsync } from '../../ui.tsx';
import './admin.css';

const t = messages(
  { pinGroup: 'Pin group', choose: '— choose —', previous: 'Previous', next: 'Next', page: 'Page {n}', yes: 'yes', no: 'no' },
  { pinGroup: 'Locatie', choose: '— kies —', previous: 'Vorige', next: 'Volgende', page: 'Pagina {n}', yes: 'ja', no: 'nee' },
);

/** A file as a base64 data URL (what the API takes for logos and imports). */
export function dataUrlOf(file: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error ?? new Error('the file could not be read'));
    reader.readAsDataURL(file);
  });
}

/** Offers bytes (a data URL or a string) as a download named `name`, through a blob: URL of this page. */
export function saveFile(content: string, name: string, type = 'text/csv'): void {
  let blob: Blob;
  const m = /^data:([^;,]*)(;base64)?,(.*)$/s.exec(content);
  if (m) {
    const raw = m[2] ? atob(m[3]) : decodeURIComponent(m[3]);
    blob = new Blob([Uint8Array.from(raw, (c) => c.charCodeAt(0))], { type: m[1] || type });
  } else blob = new Blob([content], { type });
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** The path of `url` when it is on this page's origin, else null (the console follows no link to another host). */
export function sameOriginPath(url: string): string | null {
  try {
    const u = new URL(url, location.href);
    return u.origin === location.origin ? `${u.pathname}${u.search}` : null;
  } catch {
    return null;
  }
}

/** A value pair's number. */
export const valueOf = (p: { significand: number; orderOfMagnitude: number }): number => Number(`${p.significand}e${p.orderOfMagnitude}`);

/** A typed decimal ("12.50", "-3", "1e3", "0,5") as the API's value pair; null when it is not a number that fits. */
export function valuePair(text: string): { significand: number; orderOfMagnitude: number } | null {
  const m = /^\s*([+-]?)(\d*)(?:[.,](\d*))?(?:e([+-]?\d+))?\s*$/i.exec(text);
  if (!m || (m[2] === '' && (m[3] ?? '') === '')) return null;
  let digits = `${m[2]}${m[3] ?? ''}`.replace(/^0+(?=\d)/, '');
  let magnitude = Number(m[4] ?? 0) - (m[3] ?? '').length;
  while (digits.length > 1 && digits.endsWith('0')) {
    digits = digits.slice(0, -1);
    magnitude += 1;
  }
  const significand = Number(`${m[1]}${digits}`);
  if (digits === '0') return { significand: 0, orderOfMagnitude: 0 };
  if (!Number.isSafeInteger(significand) || Math.abs(significand) > 2147483647 || magnitude < -128 || magnitude > 127) return null;
  return { significand, orderOfMagnitude: magnitude };
}

export interface PinGroupRow {
  hashId: string;
  name: string;
}

/** The environment's pin groups (names as text), for pickers. */
export function usePinGroups() {
  return useAsync(
    async () => (await findAll<{ pinGroup: PinGroupRow }>('/graph/pin-group', { rowsPerPage: 100, sortBy: 'name' }, 2000)).map((r) => r.pinGroup),
    [],
  );
}

export function PinGroupSelect({
  value,
  onChange,
  pinGroups,
  label,
}: {
  value: string;
  onChange: (hashId: string) => void;
  pinGroups: PinGroupRow[];
  label?: string;
}) {
  return (
    <Field label={label ?? t('pinGroup')}>
      {(id) => (
        <select id={id} value={value} onChange={(e) => onChange((e.target as HTMLSelectElement).value)}>
          <option value="">{t('choose')}</option>
          {pinGroups.map((p) => (
            <option key={p.hashId} value={p.hashId}>
              {p.name || p.hashId}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

/** Pages of a find operation: the offsets of the pages before (to go back) and the next one. */
export function usePager() {
  const [offsets, setOffsets] = useState<(string | undefined)[]>([undefined]);
  const offset = offsets[offsets.length - 1];
  return {
    offset,
    page: offsets.length,
    next: (nextOffset: string) => setOffsets((o) => [...o, nextOffset]),
    previous: () => setOffsets((o) => (o.length > 1 ? o.slice(0, -1) : o)),
    reset: () => setOffsets([undefined]),
  };
}

export function Pager({
  page,
  nextOffset,
  onNext,
  onPrevious,
}: {
  page: number;
  nextOffset: string | null | undefined;
  onNext: (o: string) => void;
  onPrevious: () => void;
}) {
  return (
    <nav class="pager" aria-label={t('page', { n: page })}>
      <button type="button" onClick={onPrevious} disabled={page <= 1}>
        {t('previous')}
      </button>
      <span>{t('page', { n: page })}</span>
      <button type="button" onClick={() => nextOffset && onNext(nextOffset)} disabled={!nextOffset}>
        {t('next')}
      </button>
    </nav>
  );
}

/** yes/no in the reader's language. */
export const yesNo = (b: boolean): string => (b ? t('yes') : t('no'));
