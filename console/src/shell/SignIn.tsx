// Sign in with address and password, then the authenticator's code where the person's account asks for one.
import { useState } from 'preact/hooks';
import { api, ApiError } from '../api.ts';
import { messages } from '../i18n.ts';
import { setSession, type SessionView } from '../session.ts';
import { ErrorBox, TextInput } from '../ui.tsx';

const t = messages(
  {
    title: 'Sign in',
    email: 'Email address',
    password: 'Password',
    code: 'Code from your authenticator app',
    submit: 'Sign in',
    codeHint: 'Six digits; it changes every 30 seconds.',
    forgot: 'Forgot your password?',
    wrong: 'The address or password is not right.',
  },
  {
    title: 'Inloggen',
    email: 'E-mailadres',
    password: 'Wachtwoord',
    code: 'Code uit je authenticator-app',
    submit: 'Inloggen',
    codeHint: 'Zes cijfers; de code verandert elke 30 seconden.',
    forgot: 'Wachtwoord vergeten?',
    wrong: 'Het adres of wachtwoord klopt niet.',
  },
);

export default function SignIn() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [needsCode, setNeedsCode] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const answer = await api<{ session: SessionView }>('POST', '/authentication/person/login', {
        anonymous: true,
        body: { email, password, ...(needsCode ? { code } : {}) },
      });
      setSession(answer.session);
    } catch (err) {
      if (err instanceof ApiError && err.key === 'second_factor_required') setNeedsCode(true);
      else if (err instanceof ApiError && err.status === 401 && !needsCode) setError(new Error(t('wrong')));
      else setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="narrow" id="main">
      <h1>{t('title')}</h1>
      <form onSubmit={submit}>
        <TextInput label={t('email')} type="email" value={email} onInput={setEmail} autoComplete="username" required name="email" autoFocus />
        <TextInput label={t('password')} type="password" value={password} onInput={setPassword} autoComplete="current-password" required name="password" />
        {needsCode && (
          <TextInput
            label={t('code')}
            hint={t('codeHint')}
            value={code}
            onInput={setCode}
            autoComplete="one-time-code"
            inputMode="numeric"
            required
            name="code"
            autoFocus
          />
        )}
        <ErrorBox error={error} />
        <button type="submit" class="primary" disabled={busy}>
          {t('submit')}
        </button>
      </form>
      <p>
        <a href="#/reset-password">{t('forgot')}</a>
      </p>
    </main>
  );
}
