// A user as the SDK's user model shows it, and the languages a user can have: read by users.ts and by people/
// (invitations and their mails), which users.ts in turn calls.
import type { Account, EnvironmentRecord } from '../app/account.ts';

export const LOCALES = ['en', 'nl'] as const;
export type Locale = (typeof LOCALES)[number];
/** The time zone of a user who never chose one. */
export const DEFAULT_TIMEZONE = 'UTC';

/** The SDK's user model. */
export interface UserView {
  hashId: string;
  email: string | null;
  name: string;
  timezone: string;
  locale: string;
  phone: string | null;
  company: string | null;
  rights: string[];
  twoFactorAuthenticationEnabled: boolean;
}

/** The environment's locale (monitoring settings), the language a user gets until they choose one. */
export function environmentLocale(env: EnvironmentRecord): Locale {
  const locale = (env.settings as { locale?: unknown }).locale;
  return LOCALES.includes(locale as Locale) ? (locale as Locale) : 'en';
}

/** The SDK's user model of an account or a stored user. */
export function userView(
  user: Pick<Account, 'hashId' | 'email' | 'name' | 'rights' | 'locale' | 'timezone' | 'phone' | 'company' | 'twoFactorEnabledAt'>,
  env: EnvironmentRecord,
): UserView {
  return {
    hashId: user.hashId,
    email: user.email,
    name: user.name,
    timezone: user.timezone ?? DEFAULT_TIMEZONE,
    locale: user.locale ?? environmentLocale(env),
    phone: user.phone,
    company: user.company,
    rights: user.rights,
    twoFactorAuthenticationEnabled: user.twoFactorEnabledAt !== null,
  };
}
