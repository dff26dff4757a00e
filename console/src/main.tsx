// The console: who is signed in decides what shows. Nobody: sign-in and the pages mailed links open. A person
// whose environment enforces a second factor they lack: its setup. Otherwise the pages of the environment's type.
import './styles.css';
import { render, type ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { whenSignedOut } from './api.ts';
import { customerRoutes } from './customer/routes.ts';
import { messages } from './i18n.ts';
import type { PageProps, PageRoute } from './pages.ts';
import { match, navigate, route, splitRoute } from './router.ts';
import { environmentSetting, loadSession, session, setSession } from './session.ts';
import Account from './shell/Account.tsx';
import { Layout } from './shell/Layout.tsx';
import { ResetPassword, SetPassword } from './shell/Password.tsx';
import SignIn from './shell/SignIn.tsx';
import { applyTheme } from './shell/theme.ts';
import { TwoFactorSetup } from './shell/TwoFactor.tsx';
import { supplierRoutes } from './supplier/routes.ts';
import { ErrorBox, Loading } from './ui.tsx';

const t = messages({ notFound: 'There is no page here.' }, { notFound: 'Hier is geen pagina.' });

const ROUTES: PageRoute[] = [...supplierRoutes, ...customerRoutes, { pattern: '/account', environment: 'any', load: async () => ({ default: Account }) }];

/** A page's code, loaded on first use. */
function Lazy({ page, props }: { page: PageRoute; props: PageProps }) {
  const [loaded, setLoaded] = useState<{ page: PageRoute; component: ComponentType<PageProps> } | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let live = true;
    page.load().then(
      (m) => live && setLoaded({ page, component: m.default }),
      (err: unknown) => live && setError(err),
    );
    return () => {
      live = false;
    };
  }, [page]);
  if (error) return <ErrorBox error={error} />;
  if (!loaded || loaded.page !== page) return <Loading />;
  const Page = loaded.component;
  return <Page {...props} />;
}

/** Where a person lands: the environment's defaultLandingPage when a page answers to it, else its type's first page. */
function landing(routes: PageRoute[]): string {
  const wanted = environmentSetting<string>('defaultLandingPage');
  const type = session.value?.environment.type;
  const page = routes.find((r) => wanted && r.landingPage === wanted) ?? routes.find((r) => r.nav && r.environment === type) ?? routes.find((r) => r.nav);
  return page ? page.pattern : '/account';
}

function App() {
  const s = session.value;
  const { path, params: query } = splitRoute(route.value);
  useEffect(() => {
    applyTheme(s ? environmentSetting('theme') : null);
  }, [s]);

  if (s === undefined)
    return (
      <main id="main">
        <Loading />
      </main>
    );
  if (path === '/set-password') return <SetPassword params={{}} query={query} />;
  if (s === null) return path === '/reset-password' ? <ResetPassword /> : <SignIn />;
  if (s.secondFactorSetupRequired)
    return (
      <main class="narrow" id="main">
        <TwoFactorSetup enforced />
      </main>
    );

  // the environment type's own pages first, then those of every environment (people, account)
  const routes = [...ROUTES.filter((r) => r.environment === s.environment.type), ...ROUTES.filter((r) => r.environment === 'any')];
  if (path === '/' || path === '/reset-password') {
    navigate(landing(routes));
    return null;
  }
  for (const page of routes) {
    const params = match(page.pattern, path);
    if (params)
      return (
        <Layout routes={routes}>
          <Lazy page={page} props={{ params, query }} />
        </Layout>
      );
  }
  return (
    <Layout routes={routes}>
      <p>{t('notFound')}</p>
    </Layout>
  );
}

whenSignedOut(() => setSession(null));
void loadSession();
render(<App />, document.getElementById('app')!);
