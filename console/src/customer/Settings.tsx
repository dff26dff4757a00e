// The environment's settings (environment update, ENVIRONMENT_ADMIN): its name, colours in light and dark, logo,
// language, the page people land on, the second factor it enforces, the graphs' default range and how long
// measurements are kept. Without ENVIRONMENT_ADMIN the page shows them read-only.
import { useState } from 'preact/hooks';
import { api, findAll } from '../api.ts';
import { messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { environmentSetting, hasRight, loadSession, session } from '../session.ts';
import { ErrorBox, Field, PageTitle, TextInput, useAsync } from '../ui.tsx';
import { dataUrlOf } from './admin/parts.tsx';

const COLOURS = ['primary', 'secondary', 'accent', 'error', 'warning', 'info', 'success', 'neutral'] as const;
type Colour = (typeof COLOURS)[number];
type Palette = Record<Colour, string>;

// the console's own colours (styles.css) where the environment sets none
const DEFAULTS: { light: Palette; dark: Palette } = {
  light: {
    primary: '#0b5cad',
    secondary: '#57606a',
    accent: '#8250df',
    error: '#b42318',
    warning: '#8a5300',
    info: '#0b5cad',
    success: '#1a7f37',
    neutral: '#6e7781',
  },
  dark: {
    primary: '#58a6ff',
    secondary: '#9da7b3',
    accent: '#d2a8ff',
    error: '#ff7b72',
    warning: '#e3b341',
    info: '#79c0ff',
    success: '#3fb950',
    neutral: '#8b949e',
  },
};
const RANGES = ['1 day', '1 week', '1 month', '3 months', '6 months', '1 year'];
const LANDING = ['map', 'issues', 'analytics', 'users'] as const;
const MAX_LOGO_BYTES = 512 * 1024;

const t = messages(
  {
    title: 'Settings',
    readOnly: 'You can read these settings; changing them needs the right ENVIRONMENT_ADMIN.',
    general: 'General',
    name: 'Name',
    locale: 'Language',
    en: 'English',
    nl: 'Dutch',
    theme: 'Colours',
    light: 'Light',
    dark: 'Dark',
    colour: 'Colour',
    resetTheme: "Use the console's colours",
    themeHint: 'Buttons, links and the selected page take the primary colour.',
    logo: 'Logo',
    logoHint: 'An image (PNG, SVG, JPEG) of at most 512 KB, shown in the header.',
    removeLogo: 'Remove logo',
    logoTooBig: 'The logo has {bytes} bytes; at most 524288.',
    logoNotImage: 'The logo must be an image.',
    currentLogo: 'Current logo',
    landing: 'People land on',
    map: 'Map',
    issues: 'Issues',
    analytics: 'A dashboard',
    users: 'People',
    dashboard: 'Dashboard',
    firstDashboard: '— the first —',
    security: 'Security',
    enforce2fa: 'Everyone needs a second factor (authenticator app) to use this environment',
    data: 'Data',
    graphRange: 'Graphs show by default',
    expiration: 'Keep measurements for (days)',
    save: 'Save settings',
    saved: 'Settings saved.',
    primary: 'Primary',
    secondary: 'Secondary',
    accent: 'Accent',
    error: 'Error',
    warning: 'Warning',
    info: 'Information',
    success: 'Success',
    neutral: 'Neutral',
  },
  {
    title: 'Instellingen',
    readOnly: 'Je kunt deze instellingen lezen; wijzigen vraagt het recht ENVIRONMENT_ADMIN.',
    general: 'Algemeen',
    name: 'Naam',
    locale: 'Taal',
    en: 'Engels',
    nl: 'Nederlands',
    theme: 'Kleuren',
    light: 'Licht',
    dark: 'Donker',
    colour: 'Kleur',
    resetTheme: 'De kleuren van de console gebruiken',
    themeHint: 'Knoppen, links en de gekozen pagina krijgen de primaire kleur.',
    logo: 'Logo',
    logoHint: 'Een afbeelding (PNG, SVG, JPEG) van hoogstens 512 KB, getoond in de kop.',
    removeLogo: 'Logo verwijderen',
    logoTooBig: 'Het logo heeft {bytes} bytes; hoogstens 524288.',
    logoNotImage: 'Het logo moet een afbeelding zijn.',
    currentLogo: 'Huidig logo',
    landing: 'Mensen komen binnen op',
    map: 'Kaart',
    issues: 'Meldingen',
    analytics: 'Een dashboard',
    users: 'Mensen',
    dashboard: 'Dashboard',
    firstDashboard: '— het eerste —',
    security: 'Beveiliging',
    enforce2fa: 'Iedereen heeft een tweede factor (authenticator-app) nodig voor deze omgeving',
    data: 'Gegevens',
    graphRange: 'Grafieken tonen standaard',
    expiration: 'Metingen bewaren (dagen)',
    save: 'Instellingen opslaan',
    saved: 'Instellingen opgeslagen.',
    primary: 'Primair',
    secondary: 'Secundair',
    accent: 'Accent',
    error: 'Fout',
    warning: 'Waarschuwing',
    info: 'Informatie',
    success: 'Gelukt',
    neutral: 'Neutraal',
  },
);

const HEX = /^#[0-9a-f]{6}$/i;
function paletteOf(stored: unknown, fallback: Palette): Palette {
  const p = (stored && typeof stored === 'object' ? stored : {}) as Partial<Record<Colour, string>>;
  return Object.fromEntries(COLOURS.map((c) => [c, p[c] && HEX.test(p[c]) ? p[c].toLowerCase() : fallback[c]])) as Palette;
}

export default function Settings(_: PageProps) {
  const s = session.value!;
  const canEdit = hasRight('ENVIRONMENT_ADMIN');
  const storedTheme = environmentSetting<{ light?: unknown; dark?: unknown } | null>('theme');
  const [name, setName] = useState(s.environment.name);
  const [locale, setLocale] = useState(environmentSetting<string>('locale') ?? 'en');
  const [themed, setThemed] = useState(storedTheme != null);
  const [light, setLight] = useState(paletteOf(storedTheme?.light, DEFAULTS.light));
  const [dark, setDark] = useState(paletteOf(storedTheme?.dark, DEFAULTS.dark));
  const [logo, setLogo] = useState<string | null>(environmentSetting<string | null>('logo') ?? null);
  const [landing, setLanding] = useState(environmentSetting<string>('defaultLandingPage') ?? 'map');
  const [landingHashId, setLandingHashId] = useState(environmentSetting<string | null>('defaultLandingPageHashId') ?? '');
  const [enforce, setEnforce] = useState(environmentSetting<boolean>('enforceTwoFactorAuthentication') === true);
  const [range, setRange] = useState(environmentSetting<string>('defaultGraphRange') ?? '1 month');
  const [days, setDays] = useState(String(environmentSetting<number>('measurementsExpirationDays') ?? 3650));
  const [error, setError] = useState<unknown>(null);
  const [logoProblem, setLogoProblem] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  const [busy, setBusy] = useState(false);
  const dashboards = useAsync(
    () => (landing === 'analytics' ? findAll<{ panel: { hashId: string; title: string } }>('/analytics/panel', { sortBy: 'title' }, 200) : Promise.resolve([])),
    [landing],
  );

  const pickLogo = async (file: File | undefined) => {
    setLogoProblem(null);
    if (!file) return;
    if (!file.type.startsWith('image/')) return setLogoProblem(t('logoNotImage'));
    if (file.size > MAX_LOGO_BYTES) return setLogoProblem(t('logoTooBig', { bytes: file.size }));
    setLogo(await dataUrlOf(file));
  };

  const save = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setSaved(false);
    setBusy(true);
    try {
      await api('PUT', '/environment/', {
        body: {
          name,
          locale,
          logo,
          enforceTwoFactorAuthentication: enforce,
          defaultGraphRange: range,
          measurementsExpirationDays: Number(days),
          theme: themed ? { light, dark } : null,
          defaultLandingPage: landing,
          defaultLandingPageHashId: landing === 'analytics' && landingHashId ? landingHashId : null,
        },
      });
      // the shell's header, colours and landing page follow the session's view of the environment
      await loadSession();
      setSaved(true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const colourInput = (scheme: 'light' | 'dark', c: Colour) => {
    const palette = scheme === 'light' ? light : dark;
    const set = scheme === 'light' ? setLight : setDark;
    return (
      <input
        type="color"
        id={`colour-${scheme}-${c}`}
        name={`${scheme}.${c}`}
        value={palette[c]}
        aria-label={`${t(c)} (${t(scheme)})`}
        onInput={(e) => {
          set({ ...palette, [c]: (e.target as HTMLInputElement).value });
          setThemed(true);
        }}
      />
    );
  };

  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      {!canEdit && (
        <p class="notice" role="note">
          {t('readOnly')}
        </p>
      )}
      <form class="settings" onSubmit={save}>
        <fieldset disabled={!canEdit || busy}>
          <legend>{t('general')}</legend>
          <TextInput label={t('name')} name="name" value={name} onInput={setName} required />
          <Field label={t('locale')}>
            {(id) => (
              <select id={id} name="locale" value={locale} onChange={(e) => setLocale((e.target as HTMLSelectElement).value)}>
                <option value="en">{t('en')}</option>
                <option value="nl">{t('nl')}</option>
              </select>
            )}
          </Field>
          <Field label={t('landing')}>
            {(id) => (
              <select id={id} name="defaultLandingPage" value={landing} onChange={(e) => setLanding((e.target as HTMLSelectElement).value)}>
                {LANDING.map((l) => (
                  <option key={l} value={l}>
                    {t(l)}
                  </option>
                ))}
              </select>
            )}
          </Field>
          {landing === 'analytics' && (
            <Field label={t('dashboard')}>
              {(id) => (
                <select id={id} name="defaultLandingPageHashId" value={landingHashId} onChange={(e) => setLandingHashId((e.target as HTMLSelectElement).value)}>
                  <option value="">{t('firstDashboard')}</option>
                  {(dashboards.data ?? []).map((d) => (
                    <option key={d.panel.hashId} value={d.panel.hashId}>
                      {d.panel.title}
                    </option>
                  ))}
                </select>
              )}
            </Field>
          )}
        </fieldset>

        <fieldset disabled={!canEdit || busy}>
          <legend>{t('theme')}</legend>
          <p class="muted">{t('themeHint')}</p>
          <div class="swatches" role="group" aria-label={t('theme')}>
            <span aria-hidden="true" />
            <span class="muted" aria-hidden="true">
              {t('light')}
            </span>
            <span class="muted" aria-hidden="true">
              {t('dark')}
            </span>
            {COLOURS.map((c) => [
              <span key={`${c}-name`}>{t(c)}</span>,
              <span key={`${c}-light`}>{colourInput('light', c)}</span>,
              <span key={`${c}-dark`}>{colourInput('dark', c)}</span>,
            ])}
          </div>
          <div class="field check">
            <label>
              <input type="checkbox" name="resetTheme" checked={!themed} onChange={(e) => setThemed(!(e.target as HTMLInputElement).checked)} />{' '}
              {t('resetTheme')}
            </label>
          </div>
        </fieldset>

        <fieldset disabled={!canEdit || busy}>
          <legend>{t('logo')}</legend>
          {logo && logo.startsWith('data:image/') && (
            <p>
              <img class="logo-preview" src={logo} alt={t('currentLogo')} />
            </p>
          )}
          <Field label={t('logo')} hint={t('logoHint')}>
            {(id) => (
              <input
                id={id}
                name="logo"
                type="file"
                accept="image/png,image/jpeg,image/svg+xml,image/gif,image/webp"
                onChange={(e) => void pickLogo((e.target as HTMLInputElement).files?.[0])}
              />
            )}
          </Field>
          {logoProblem && (
            <p class="bad" role="alert">
              {logoProblem}
            </p>
          )}
          {logo && (
            <button type="button" onClick={() => setLogo(null)}>
              {t('removeLogo')}
            </button>
          )}
        </fieldset>

        <fieldset disabled={!canEdit || busy}>
          <legend>{t('security')}</legend>
          <div class="field check">
            <label>
              <input
                type="checkbox"
                name="enforceTwoFactorAuthentication"
                checked={enforce}
                onChange={(e) => setEnforce((e.target as HTMLInputElement).checked)}
              />{' '}
              {t('enforce2fa')}
            </label>
          </div>
        </fieldset>

        <fieldset disabled={!canEdit || busy}>
          <legend>{t('data')}</legend>
          <Field label={t('graphRange')}>
            {(id) => (
              <select id={id} name="defaultGraphRange" value={range} onChange={(e) => setRange((e.target as HTMLSelectElement).value)}>
                {(RANGES.includes(range) ? RANGES : [range, ...RANGES]).map((r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label={t('expiration')}>
            {(id) => (
              <input
                id={id}
                name="measurementsExpirationDays"
                type="number"
                min={1}
                max={9999}
                step={1}
                required
                value={days}
                onInput={(e) => setDays((e.target as HTMLInputElement).value)}
              />
            )}
          </Field>
        </fieldset>
        <ErrorBox error={error} />
        {saved && (
          <p class="ok" role="status">
            {t('saved')}
          </p>
        )}
        {canEdit && (
          <button type="submit" class="primary" disabled={busy}>
            {t('save')}
          </button>
        )}
      </form>
    </section>
  );
}
