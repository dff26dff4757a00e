// Settings declared once. Each area declares the environment variables it reads as plain data beside the
// module that uses them (`src/<area>/settings.ts`): variable, kind, default, accepted range, description. From
// those declarations come the `Config` type (each settings file merges its part into `Config` of
// app/config.ts), the validation (`loadSettings`, here: every error names the variable and what it accepts) and
// the tables of docs/configuration.md (`npm run docs:config`, checked by test/app-config.test.ts).
//
// The layering rule: this file imports nothing of ours. A settings file of a protocol library (tls, dtls, coap,
// sandbox) imports only its types (`import type`), so a declaration is data any layer can hold; the kernel's
// loader and the composition root (src/settings.ts, which lists every group) are the only callers of its
// functions, and the loader reads no variable that is not declared (`read` refuses one).

import path from 'node:path';

/** The environment as read: process.env, or a test's object. */
export type Env = Readonly<Record<string, string | undefined>>;

interface Common {
  /** the environment variable */
  readonly env: string;
  /** its meaning, as docs/configuration.md shows it (Markdown) */
  readonly description: string;
  /** the docs' default column where the default is computed or needs words ("unset → …") */
  readonly defaultText?: string;
  /** the docs' column of what it accepts, where the kind says too little ("text") */
  readonly accepts?: string;
}

/** An integer between min and max; `default: null` makes it optional (unset: null). */
export interface IntSetting extends Common {
  readonly kind: 'int';
  readonly default: number | null;
  readonly min: number;
  readonly max: number;
  /** shown after the default in the docs, e.g. "30 days" */
  readonly note?: string;
}

/** A string; `default: null` makes it optional (unset: null). */
export interface StrSetting extends Common {
  readonly kind: 'str';
  readonly default: string | null;
}

/** One of `values`. */
export interface EnumSetting extends Common {
  readonly kind: 'enum';
  readonly values: readonly string[];
  readonly default: string;
}

/** A directory or file, resolved against the working directory. */
export interface PathSetting extends Common {
  readonly kind: 'path';
  readonly default: string;
}

/** `on` or `off`. */
export interface OnOffSetting extends Common {
  readonly kind: 'onOff';
  readonly default: boolean;
}

/** A comma-separated list; unset or empty: none. */
export interface ListSetting extends Common {
  readonly kind: 'list';
  readonly lowerCase?: boolean;
  readonly defaultText: string;
}

/** An http or https URL (its href); unset: null. */
export interface UrlSetting extends Common {
  readonly kind: 'url';
  readonly default: null;
  readonly defaultText: string;
}

/** Anything else: `parse` gets the raw value (undefined when unset or empty) and may read other declared settings. */
export interface CustomSetting<T = unknown> extends Common {
  readonly kind: 'custom';
  readonly defaultText: string;
  /** what it accepts, for the docs */
  readonly accepts: string;
  parse(raw: string | undefined, ctx: SettingsContext): T;
}

export type Setting = IntSetting | StrSetting | EnumSetting | PathSetting | OnOffSetting | ListSetting | UrlSetting | CustomSetting;

/** Settings that belong together under one key of `Config`; with `when`, the group is null unless that variable is set. */
export interface SettingsGroup {
  readonly kind: 'group';
  readonly when?: string;
  readonly settings: Settings;
}

/** Declarations by the key of `Config` they fill. */
export type Settings = { readonly [key: string]: Setting | SettingsGroup };

/** What a custom setting's parse may look at besides its own value. */
export interface SettingsContext {
  /** the value of another declared setting (declarations are constants its area exports) */
  get<S extends Setting>(setting: S): ValueOf<S>;
}

/** The value a declaration gives. */
export type ValueOf<S> = S extends IntSetting
  ? S['default'] extends number
    ? number
    : number | null
  : S extends StrSetting
    ? S['default'] extends string
      ? string
      : string | null
    : S extends PathSetting | EnumSetting
      ? string
      : S extends OnOffSetting
        ? boolean
        : S extends ListSetting
          ? string[]
          : S extends UrlSetting
            ? string | null
            : S extends CustomSetting<infer T>
              ? T
              : S extends { kind: 'group'; settings: infer G }
                ? S extends { when: string }
                  ? SettingsOf<G> | null
                  : SettingsOf<G>
                : never;

/** The configuration a set of declarations gives: what `Config` is made of. */
export type SettingsOf<G> = { -readonly [K in keyof G]: ValueOf<G[K]> };

/** Every declaration of `settings`, depth first, in declaration order. */
export function declarations(settings: Settings): Setting[] {
  return Object.values(settings).flatMap((s) => (s.kind === 'group' ? declarations(s.settings) : [s]));
}

/** Loads `settings` from `env`: each value parsed and checked, defaults for what is unset. Throws on the first bad value. */
export function loadSettings<S extends Settings>(settings: S, env: Env): SettingsOf<S> {
  const declared = new Set<string>();
  for (const s of declarations(settings)) {
    if (declared.has(s.env)) throw new Error(`${s.env} is declared twice`);
    declared.add(s.env);
  }
  const read = (name: string): string | undefined => {
    if (!declared.has(name)) throw new Error(`${name} is read but not declared`);
    const raw = env[name];
    return raw === undefined || raw === '' ? undefined : raw;
  };
  const ctx: SettingsContext = { get: (s) => valueOf(s, read, ctx) as never };
  const load = (group: Settings): Record<string, unknown> =>
    Object.fromEntries(
      Object.entries(group).map(([key, s]) => {
        if (s.kind !== 'group') return [key, valueOf(s, read, ctx)];
        return [key, s.when !== undefined && read(s.when) === undefined ? null : load(s.settings)];
      }),
    );
  return load(settings) as SettingsOf<S>;
}

function valueOf(s: Setting, read: (name: string) => string | undefined, ctx: SettingsContext): unknown {
  const raw = read(s.env);
  switch (s.kind) {
    case 'int': {
      if (raw === undefined) return s.default;
      const n = Number(raw);
      if (!/^-?\d+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < s.min || n > s.max) {
        throw new Error(`${s.env} must be an integer between ${s.min} and ${s.max}, got "${raw}"`);
      }
      return n;
    }
    case 'str':
      return raw ?? s.default;
    case 'enum':
      if (raw === undefined) return s.default;
      if (s.values.includes(raw)) return raw;
      throw new Error(`${s.env} must be one of ${s.values.join(', ')}, got "${raw}"`);
    case 'path':
      return path.resolve(raw ?? s.default);
    case 'onOff':
      if (raw === undefined) return s.default;
      if (raw === 'on' || raw === 'off') return raw === 'on';
      throw new Error(`${s.env} must be on or off, got "${raw}"`);
    case 'list':
      return (raw ?? '')
        .split(',')
        .map((i) => (s.lowerCase ? i.trim().toLowerCase() : i.trim()))
        .filter((i) => i !== '');
    case 'url': {
      if (raw === undefined) return null;
      let url: URL | undefined;
      try {
        url = new URL(raw);
      } catch {
        url = undefined;
      }
      if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw new Error(`${s.env} must be an http or https URL, got "${raw}"`);
      return url.href;
    }
    case 'custom':
      return s.parse(raw, ctx);
  }
}

/** The docs' default column of a declaration. */
export function defaultText(s: Setting): string {
  if (s.defaultText !== undefined) return s.defaultText;
  switch (s.kind) {
    case 'int':
      return s.default === null ? 'unset' : `\`${s.default}\`${s.note ? ` (${s.note})` : ''}`;
    case 'str':
      return s.default === null ? 'unset' : `\`${s.default}\``;
    case 'enum':
    case 'path':
      return `\`${s.default}\``;
    case 'onOff':
      return s.default ? '`on`' : '`off`';
    default:
      return s.defaultText;
  }
}

/** The docs' column of what a declaration accepts. */
export function acceptsText(s: Setting): string {
  if (s.accepts !== undefined) return s.accepts;
  switch (s.kind) {
    case 'int':
      return s.max >= 2 ** 31 ? `${s.min} or more` : `${s.min} – ${s.max}`;
    case 'str':
      return 'text';
    case 'enum':
      return s.values.map((v) => `\`${v}\``).join(', ');
    case 'path':
      return 'a path';
    case 'onOff':
      return '`on`, `off`';
    case 'list':
      return 'comma-separated';
    case 'url':
      return 'an http(s) URL';
    case 'custom':
      return s.accepts;
  }
}

/** One group of the configuration table: its title and declarations. */
export interface SettingsTable {
  readonly title: string;
  /** where they are declared, shown under the title */
  readonly source: string;
  readonly settings: Settings;
}

/** The Markdown of docs/configuration.md's tables, one per group. */
export function settingsMarkdown(tables: readonly SettingsTable[]): string {
  const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');
  return tables
    .map((t) => {
      const rows = declarations(t.settings).map((s) => `| \`${s.env}\` | ${cell(defaultText(s))} | ${cell(acceptsText(s))} | ${cell(s.description)} |`);
      return [`### ${t.title}`, '', `Declared in \`${t.source}\`.`, '', '| variable | default | accepts | meaning |', '|---|---|---|---|', ...rows].join('\n');
    })
    .join('\n\n');
}
