// The pages a mailed link opens: set a password (an invitation or a reset), and asking for a reset link.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { navigate } from '../router.ts';
import { ErrorBox, TextInput } from '../ui.tsx';

const t = messages(
  {
    setTitle: 'Choose your password',
    password: 'New password',
    repeat: 'The same password again',
    save: 'Save password',
    hint: 'At least 12 characters.',
    mismatch: 'The two passwords differ.',
    done: 'Your password is set. Sign in with it.',
    signIn: 'Sign in',
    resetTitle: 'Reset your password',
    email: 'Email address',
    send: 'Send me a link',
    sent: 'If the address is known, a link is on its way. It works for one hour.',
  },
  {
    setTitle: 'Kies je wachtwoord',
    password: 'Nieuw wachtwoord',
    repeat: 'Hetzelfde wachtwoord nog eens',
    save: 'Wachtwoord opslaan',
    hint: 'Minstens 12 tekens.',
    mismatch: 'De twee wachtwoorden verschillen.',
    done: 'Je wachtwoord is ingesteld. Log ermee in.',
    signIn: 'Inloggen',
    resetTitle: 'Wachtwoord opnieuw instellen',
    email: 'E-mailadres',
    send: 'Stuur me een link',
    sent: 'Als het adres bekend is, is er een link onderweg. Die werkt een uur.',
  },
);

export function SetPassword({ query }: PageProps) {
  const [password, setPassword] = useState('');
  const [repeat, setRepeat] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (password !== repeat) return setError(new Error(t('mismatch')));
    setError(null);
    try {
      await api('POST', '/authentication/person/set-password', { anonymous: true, body: { token: query.get('token') ?? '', password } });
      setDone(true);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <main class="narrow" id="main">
      <h1>{t('setTitle')}</h1>
      {done ? (
        <p role="status">
          {t('done')}{' '}
          <a href="#/" onClick={() => navigate('/')}>
            {t('signIn')}
          </a>
        </p>
      ) : (
        <form onSubmit={submit}>
          <TextInput
            label={t('password')}
            hint={t('hint')}
            type="password"
            value={password}
            onInput={setPassword}
            autoComplete="new-password"
            required
            name="password"
            autoFocus
          />
          <TextInput label={t('repeat')} type="password" value={repeat} onInput={setRepeat} autoComplete="new-password" required name="repeat" />
          <ErrorBox error={error} />
          <button type="submit" class="primary">
            {t('save')}
          </button>
        </form>
      )}
    </main>
  );
}

export function ResetPassword() {
  const [email, setEmail] = useState('');
  const [sent, setSent] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    try {
      await api('POST', '/authentication/person/password-reset', { anonymous: true, body: { email } });
      setSent(true);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <main class="narrow" id="main">
      <h1>{t('resetTitle')}</h1>
      {sent ? (
        <p role="status">{t('sent')}</p>
      ) : (
        <form onSubmit={submit}>
          <TextInput label={t('email')} type="email" value={email} onInput={setEmail} autoComplete="username" required name="email" autoFocus />
          <ErrorBox error={error} />
          <button type="submit" class="primary">
            {t('send')}
          </button>
        </form>
      )}
    </main>
  );
}
