import { environmentView } from '../environments/view.ts';
import type { Account, EnvironmentRecord, EnvironmentType } from '../store.ts';
import { lacksEnforcedSecondFactor } from '../two-factor/enforce.ts';
import { userView, type UserView } from '../users.ts';
import type { PersonSession } from './sessions.ts';

export interface EnvironmentSummary {
  hashId: string;
  name: string;
  type: EnvironmentType;
}

/** What the console needs after sign-in, a switch, or a reload (the contract: src/accounts/people/README.md). */
export interface SessionView {
  user: UserView;
  environment: EnvironmentSummary & { settings: Record<string, unknown> };
  environmentRights: string[];
  environments: EnvironmentSummary[];
  /** the environment enforces two-factor authentication and this row has none: only its setup routes answer */
  secondFactorSetupRequired: boolean;
  expiresAt: string;
}

const summary = (env: EnvironmentRecord): EnvironmentSummary => ({ hashId: env.hashId, name: env.name, type: env.type });

/** The environment's settings as environment get (monitoring) or supplier get (connectivity) show them, and the console's own. */
function settingsOf(env: EnvironmentRecord): Record<string, unknown> {
  const s = env.settings;
  const common = {
    theme: s.theme ?? null,
    logo: s.logo ?? null,
    locale: s.locale ?? 'en',
    defaultLandingPage: s.defaultLandingPage ?? null,
    defaultLandingPageHashId: s.defaultLandingPageHashId ?? null,
    enforceTwoFactorAuthentication: s.enforceTwoFactorAuthentication === true,
  };
  if (env.type !== 'monitoring') return common;
  const { hashId: _h, type: _t, name: _n, ...monitoring } = environmentView(env);
  return { ...common, ...monitoring };
}

export function sessionView(account: Account, accounts: Account[], session: PersonSession): SessionView {
  const env = account.environment;
  return {
    user: userView(account, env),
    environment: { ...summary(env), settings: settingsOf(env) },
    environmentRights: account.rights,
    environments: accounts.map((a) => summary(a.environment)),
    secondFactorSetupRequired: lacksEnforcedSecondFactor(account),
    expiresAt: session.expiresAt.toISOString(),
  };
}
