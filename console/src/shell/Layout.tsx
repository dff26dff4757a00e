// The frame of every signed-in page: the environment's logo and name, switching environments, the navigation of
// the environment's type, language, light or dark, and signing out.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError } from '../api.ts';
import { locale, messages, setLocale } from '../i18n.ts';
import type { PageRoute } from '../pages.ts';
import { route } from '../router.ts';
import { environmentSetting, session, signOut, switchEnvironment } from '../session.ts';
import { ErrorBox } from '../ui.tsx';
import { scheme, setScheme } from './theme.ts';

const t = messages(
  {
    skip: 'Skip to content',
    environment: 'Environment',
    navigation: 'Main',
    language: 'Language',
    dark: 'Dark',
    light: 'Light',
    account: 'Account',
    signOut: 'Sign out',
    code: 'Code from your authenticator app for this environment',
    go: 'Switch',
    connectivity: 'supplier',
    monitoring: 'monitoring',
  },
  {
    skip: 'Naar de inhoud',
    environment: 'Omgeving',
    navigation: 'Hoofdmenu',
    language: 'Taal',
    dark: 'Donker',
    light: 'Licht',
    account: 'Account',
    signOut: 'Uitloggen',
    code: 'Code uit je authenticator-app voor deze omgeving',
    go: 'Wisselen',
    connectivity: 'leverancier',
    monitoring: 'monitoring',
  },
);

export function Layout({ routes, children }: { routes: PageRoute[]; children: ComponentChildren }) {
  const s = session.value!;
  const [pending, setPending] = useState<string | null>(null);
  const [code, setCode] = useState('');
  const [error, setError] = useState<unknown>(null);
  const logo = environmentSetting<string | null>('logo');
  const current = route.value;

  const change = async (hashId: string, withCode?: string) => {
    setError(null);
    try {
      await switchEnvironment(hashId, withCode);
      setPending(null);
      setCode('');
      location.hash = '/';
    } catch (err) {
      if (err instanceof ApiError && err.key === 'second_factor_required') setPending(hashId);
      else setError(err);
    }
  };

  return (
    <>
      <a
        class="skip"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        {t('skip')}
      </a>
      <header class="top">
        <div class="brand">
          {logo && logo.startsWith('data:image/') && <img src={logo} alt="" height={28} />}
          <span class="env-name">{s.environment.name}</span>
        </div>
        {s.environments.length > 1 && (
          <label class="inline">
            <span class="sr-only">{t('environment')}</span>
            <select value={s.environment.hashId} onChange={(e) => change((e.target as HTMLSelectElement).value)}>
              {s.environments.map((env) => (
                <option key={env.hashId} value={env.hashId}>
                  {env.name} ({t(env.type)})
                </option>
              ))}
            </select>
          </label>
        )}
        <nav aria-label={t('navigation')}>
          <ul>
            {routes
              .filter((r) => r.nav)
              .map((r) => (
                <li key={r.pattern}>
                  <a href={`#${r.pattern}`} aria-current={current === r.pattern || current.startsWith(`${r.pattern}/`) ? 'page' : undefined}>
                    {r.nav![locale.value]}
                  </a>
                </li>
              ))}
          </ul>
        </nav>
        <div class="tools">
          <label class="inline">
            <span class="sr-only">{t('language')}</span>
            <select value={locale.value} onChange={(e) => setLocale((e.target as HTMLSelectElement).value, true)}>
              <option value="en">English</option>
              <option value="nl">Nederlands</option>
            </select>
          </label>
          <button type="button" onClick={() => setScheme(scheme.value === 'dark' ? 'light' : 'dark')}>
            {scheme.value === 'dark' ? t('light') : t('dark')}
          </button>
          <a href="#/account">{t('account')}</a>
          <button type="button" onClick={() => signOut()}>
            {t('signOut')}
          </button>
        </div>
      </header>
      {pending && (
        <form
          class="banner"
          onSubmit={(e) => {
            e.preventDefault();
            void change(pending, code);
          }}
        >
          <label>
            {t('code')}{' '}
            <input value={code} onInput={(e) => setCode((e.target as HTMLInputElement).value)} inputMode="numeric" autoComplete="one-time-code" required />
          </label>
          <button type="submit">{t('go')}</button>
        </form>
      )}
      <ErrorBox error={error} />
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </>
  );
}
