// The signed-in person: their session as the API answers it (GET /authentication/person/session), the environment
// they work in, and switching between the environments they are a user of.
import { signal } from '@preact/signals';
import { api, useEnvironment } from './api.ts';
import { setLocale } from './i18n.ts';

export interface EnvironmentSummary {
  hashId: string;
  name: string;
  type: 'monitoring' | 'connectivity';
}

export interface SessionView {
  user: { hashId: string; name: string; email: string | null; locale: string; timezone: string; rights: string[]; twoFactorAuthenticationEnabled: boolean };
  environment: EnvironmentSummary & { settings?: Record<string, unknown> } & Record<string, unknown>;
  environmentRights: string[];
  environments: EnvironmentSummary[];
  secondFactorSetupRequired: boolean;
  expiresAt: string;
}

/** undefined while the first answer is awaited, null when nobody is signed in. */
export const session = signal<SessionView | null | undefined>(undefined);

export function setSession(next: SessionView | null): void {
  useEnvironment(next ? next.environment : null);
  if (next) setLocale(next.user.locale);
  session.value = next;
}

export async function loadSession(): Promise<void> {
  try {
    const answer = await api<{ session: SessionView }>('GET', '/authentication/person/session', { anonymous: true });
    setSession(answer.session);
  } catch {
    setSession(null);
  }
}

export async function switchEnvironment(environmentHashId: string, code?: string): Promise<void> {
  const answer = await api<{ session: SessionView }>('POST', '/authentication/person/switch-environment', {
    body: { environmentHashId, code },
    anonymous: true,
  });
  setSession(answer.session);
}

export async function signOut(everywhere = false): Promise<void> {
  try {
    await api('POST', everywhere ? '/authentication/person/logout-everywhere' : '/authentication/person/logout', { anonymous: true });
  } finally {
    setSession(null);
  }
}

/** A setting of the environment, wherever the session's view keeps it (top level or under settings). */
export function environmentSetting<T>(key: string): T | undefined {
  const env = session.value?.environment;
  if (!env) return undefined;
  return (env[key] ?? env.settings?.[key]) as T | undefined;
}

export const hasRight = (right: string): boolean => session.value?.environmentRights.includes(right) ?? false;
