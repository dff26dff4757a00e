// The signed-in person's own page: who they are here, their second factor, signing out everywhere.
import { messages } from '../i18n.ts';
import type { PageProps } from '../pages.ts';
import { session, signOut } from '../session.ts';
import { PageTitle } from '../ui.tsx';
import { TwoFactorSetup } from './TwoFactor.tsx';

const t = messages(
  {
    title: 'Your account',
    name: 'Name',
    email: 'Email address',
    rights: 'Rights here',
    everywhere: 'Sign out everywhere',
    everywhereHint: 'Ends every session of yours, in every browser.',
    tfaOn: 'Two-factor authentication is on.',
  },
  {
    title: 'Je account',
    name: 'Naam',
    email: 'E-mailadres',
    rights: 'Rechten hier',
    everywhere: 'Overal uitloggen',
    everywhereHint: 'Beëindigt al je sessies, in elke browser.',
    tfaOn: 'Tweestapsverificatie staat aan.',
  },
);

export default function Account(_: PageProps) {
  const s = session.value;
  if (!s) return null;
  return (
    <section>
      <PageTitle>{t('title')}</PageTitle>
      <dl>
        <dt>{t('name')}</dt>
        <dd>{s.user.name}</dd>
        <dt>{t('email')}</dt>
        <dd>{s.user.email}</dd>
        <dt>{t('rights')}</dt>
        <dd>{s.environmentRights.join(', ')}</dd>
      </dl>
      {s.user.twoFactorAuthenticationEnabled ? <p>{t('tfaOn')}</p> : <TwoFactorSetup enforced={false} />}
      <p>
        <button type="button" onClick={() => signOut(true)}>
          {t('everywhere')}
        </button>
        <small class="muted"> {t('everywhereHint')}</small>
      </p>
    </section>
  );
}
