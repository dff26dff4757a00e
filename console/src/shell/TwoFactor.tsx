// Setting up a second factor: where the environment enforces one and the person has none, this is the only page
// they reach; otherwise it is part of their account page.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { messages } from '../i18n.ts';
import { loadSession } from '../session.ts';
import { ErrorBox, TextInput } from '../ui.tsx';

const t = messages(
  {
    title: 'Set up two-factor authentication',
    enforced: 'This environment requires a second factor. Add this account to an authenticator app to go on.',
    password: 'Your password',
    start: 'Show my key',
    secret: 'Key for your authenticator app',
    uri: 'Or add it from this link',
    code: 'Code from the app',
    enable: 'Turn on',
    enabled: 'Two-factor authentication is on.',
  },
  {
    title: 'Tweestapsverificatie instellen',
    enforced: 'Deze omgeving vereist een tweede factor. Voeg dit account toe aan een authenticator-app om verder te gaan.',
    password: 'Je wachtwoord',
    start: 'Toon mijn sleutel',
    secret: 'Sleutel voor je authenticator-app',
    uri: 'Of voeg hem toe met deze link',
    code: 'Code uit de app',
    enable: 'Aanzetten',
    enabled: 'Tweestapsverificatie staat aan.',
  },
);

export function TwoFactorSetup({ enforced }: { enforced: boolean }) {
  const [password, setPassword] = useState('');
  const [key, setKey] = useState<{ keyuri: string | null; secret: string | null } | null>(null);
  const [code, setCode] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);

  const start = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      setKey(await api('POST', '/two-factor-authentication/get-keyuri', { body: { password } }));
    } catch (err) {
      setError(err);
    }
  };
  const enable = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      await api('POST', '/two-factor-authentication/enable', { body: { code } });
      setDone(true);
      await loadSession();
    } catch (err) {
      setError(err);
    }
  };

  return (
    <section>
      <h2>{t('title')}</h2>
      {enforced && <p>{t('enforced')}</p>}
      {done ? (
        <p role="status">{t('enabled')}</p>
      ) : key?.secret ? (
        <form onSubmit={enable}>
          <p>
            {t('secret')}: <code data-testid="totp-secret">{key.secret}</code>
          </p>
          {key.keyuri && (
            <p>
              {t('uri')}: <a href={key.keyuri}>{t('uri')}</a>
            </p>
          )}
          <TextInput label={t('code')} value={code} onInput={setCode} inputMode="numeric" autoComplete="one-time-code" required name="code" autoFocus />
          <ErrorBox error={error} />
          <button type="submit" class="primary">
            {t('enable')}
          </button>
        </form>
      ) : (
        <form onSubmit={start}>
          <TextInput label={t('password')} type="password" value={password} onInput={setPassword} autoComplete="current-password" required name="password" />
          <ErrorBox error={error} />
          <button type="submit" class="primary">
            {t('start')}
          </button>
        </form>
      )}
    </section>
  );
}
