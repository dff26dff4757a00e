// Translations: each module keeps its own messages in `en` and `nl` beside its code (messages(...)), so a page's
// words live with the page. The locale is the signed-in person's (user.locale), else the browser's, else en.
import { signal } from '@preact/signals';

export type Locale = 'en' | 'nl';
export const LOCALES: Locale[] = ['en', 'nl'];

function browserLocale(): Locale {
  const saved = localStorage.getItem('gridgate.locale');
  if (saved === 'en' || saved === 'nl') return saved;
  return navigator.language.toLowerCase().startsWith('nl') ? 'nl' : 'en';
}

export const locale = signal<Locale>(browserLocale());
document.documentElement.lang = locale.value;

export function setLocale(next: string | null | undefined, remember = false): void {
  const value: Locale = next === 'nl' ? 'nl' : 'en';
  locale.value = value;
  document.documentElement.lang = value;
  if (remember) localStorage.setItem('gridgate.locale', value);
}

type Params = Record<string, string | number>;

/**
 * A module's messages: `en` names every key, `nl` must name the same ones (checked by the compiler).
 * `{name}` in a message is replaced by params.name.
 */
export function messages<K extends string>(en: Record<K, string>, nl: Record<K, string>): (key: K, params?: Params) => string {
  const all = { en, nl };
  return (key, params) => {
    const text = all[locale.value][key] ?? en[key];
    return params ? text.replace(/\{(\w+)\}/g, (m, p: string) => (p in params ? String(params[p]) : m)) : text;
  };
}

/** A translation object of the API (`{en: ..., nl: ...}`) or a plain string, in the current locale. */
export function translated(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object') {
    const v = value as Record<string, string>;
    return v[locale.value] ?? v.en ?? Object.values(v)[0] ?? '';
  }
  return '';
}

export const formatDate = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString(locale.value === 'nl' ? 'nl-NL' : 'en-GB') : '–');
export const formatNumber = (n: number): string => n.toLocaleString(locale.value === 'nl' ? 'nl-NL' : 'en-GB');
