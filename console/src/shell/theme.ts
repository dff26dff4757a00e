// Light or dark (the person's choice, else the system's), in the environment's own colours (its `theme`).
import { signal } from '@preact/signals';

export type Scheme = 'light' | 'dark';
type Palette = Partial<Record<'primary' | 'secondary' | 'accent' | 'error' | 'warning' | 'info' | 'success' | 'neutral', string>>;

const saved = localStorage.getItem('gridgate.scheme');
const system = (): Scheme => (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
export const scheme = signal<Scheme>(saved === 'dark' || saved === 'light' ? saved : system());

let palettes: { light?: Palette; dark?: Palette } | null = null;

/** A colour the API stored: only plain CSS colour notations reach a style (no url(), no expressions). */
const SAFE_COLOUR = /^(#[0-9a-f]{3,8}|(rgb|rgba|hsl|hsla)\([0-9.,%\s/]+\)|[a-z]{3,20})$/i;

export function applyTheme(theme: unknown): void {
  palettes = theme && typeof theme === 'object' ? (theme as typeof palettes) : null;
  paint();
}

export function setScheme(next: Scheme): void {
  scheme.value = next;
  localStorage.setItem('gridgate.scheme', next);
  paint();
}

function paint(): void {
  const root = document.documentElement;
  root.dataset.scheme = scheme.value;
  for (const name of ['primary', 'secondary', 'accent', 'error', 'warning', 'info', 'success', 'neutral'] as const) {
    const colour = palettes?.[scheme.value]?.[name];
    if (colour && SAFE_COLOUR.test(colour)) root.style.setProperty(`--env-${name}`, colour);
    else root.style.removeProperty(`--env-${name}`);
  }
}

paint();
