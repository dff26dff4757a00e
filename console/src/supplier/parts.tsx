// Small parts of the supplier's device pages: relative times, JSON shown as text, a page of a find route.
import type { ComponentChildren } from 'preact';
import { formatDate, locale, messages } from '../i18n.ts';

const t = messages({ never: 'never', copy: 'Copy', copied: 'Copied' }, { never: 'nooit', copy: 'Kopiëren', copied: 'Gekopieerd' });

/** "3 minutes ago" in the person's language, with the exact time beside it for a mouse and a screen reader. */
export function Ago({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span class="muted">{t('never')}</span>;
  return (
    <time dateTime={iso} title={formatDate(iso)}>
      {relative(iso)}
    </time>
  );
}

export function relative(iso: string, now = Date.now()): string {
  let seconds = Math.round((Date.parse(iso) - now) / 1000);
  // the service's clock a little ahead of the browser's: a moment ago, not "in 2 seconds"
  if (seconds > 0 && seconds < 60) seconds = 0;
  const rtf = new Intl.RelativeTimeFormat(locale.value === 'nl' ? 'nl' : 'en', { numeric: 'auto' });
  const abs = Math.abs(seconds);
  if (abs < 60) return rtf.format(seconds, 'second');
  if (abs < 3600) return rtf.format(Math.round(seconds / 60), 'minute');
  if (abs < 86400) return rtf.format(Math.round(seconds / 3600), 'hour');
  return rtf.format(Math.round(seconds / 86400), 'day');
}

/** Any value as indented JSON text (a string stays as it is). */
export function Json({ value }: { value: unknown }) {
  const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  // focusable: a long one scrolls, and a keyboard must reach it
  return <pre tabIndex={0}>{text}</pre>;
}

/** A section of a page with its heading. */
export function Section({ title, id, children, actions }: { title: string; id: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="panel" aria-labelledby={`${id}-title`}>
      <div class="panel-title">
        <h2 id={`${id}-title`}>{title}</h2>
        {actions}
      </div>
      {children}
    </section>
  );
}

/** Random bytes as hex (a new pre-shared key). */
export function randomHex(bytes: number): string {
  return [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/** What people call a device: its user-facing identifier, else (that is only its hashId) the supplier's identifier. */
export const deviceName = (d: { hashId: string; userFacingIdentifier: string; supplierDeviceIdentifier: string }): string =>
  d.userFacingIdentifier && d.userFacingIdentifier !== d.hashId ? d.userFacingIdentifier : d.supplierDeviceIdentifier;
