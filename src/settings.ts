// Every setting of the service, by area: the list the composition root loads `Config` from and docs/configuration.md's
// tables are generated from (`npm run docs:config`). Each group is declared beside the module that uses it; a new
// area's settings file is added here, once.
import type { Config, Role } from './app/config.ts';
import { KERNEL_SETTINGS } from './app/config.ts';
import { declarations, defaultText, loadSettings, type Env, type Settings, type SettingsOf, type SettingsTable } from './app/settings.ts';
import { ACCOUNTS_SETTINGS } from './accounts/account-settings.ts';
import { API_SETTINGS } from './api/settings.ts';
import { CONNECTIVITY_SETTINGS } from './connectivity/settings.ts';
import { DTLS_CLUSTER_SETTINGS } from './dtls/cluster/settings.ts';
import { DTLS_SETTINGS } from './dtls/settings.ts';
import { GATEWAY_SETTINGS } from './gateway/settings.ts';
import { MAIL_SETTINGS } from './mail/settings.ts';
import { MONITORING_SETTINGS } from './monitoring/settings.ts';
import { NOTIFICATION_SETTINGS } from './notifications/settings.ts';
import { PIPELINE_SETTINGS } from './pipeline/settings.ts';
import { SANDBOX_SETTINGS } from './sandbox/settings.ts';

/** The groups in the order docs/configuration.md shows them. */
export const SETTINGS_TABLES = [
  { title: 'Processes, stores and keys', source: 'src/app/config.ts', settings: KERNEL_SETTINGS },
  { title: 'REST API', source: 'src/api/settings.ts', settings: API_SETTINGS },
  { title: 'Accounts, logins and console sessions', source: 'src/accounts/account-settings.ts', settings: ACCOUNTS_SETTINGS },
  { title: 'Device ports', source: 'src/gateway/settings.ts', settings: GATEWAY_SETTINGS },
  { title: 'DTLS server', source: 'src/dtls/settings.ts', settings: DTLS_SETTINGS },
  { title: 'Gateway cluster', source: 'src/dtls/cluster/settings.ts', settings: DTLS_CLUSTER_SETTINGS },
  { title: 'Supplier code', source: 'src/sandbox/settings.ts', settings: SANDBOX_SETTINGS },
  { title: 'Workers and the report path', source: 'src/pipeline/settings.ts', settings: PIPELINE_SETTINGS },
  { title: 'Connectivity', source: 'src/connectivity/settings.ts', settings: CONNECTIVITY_SETTINGS },
  { title: 'Monitoring', source: 'src/monitoring/settings.ts', settings: MONITORING_SETTINGS },
  { title: 'Mail', source: 'src/mail/settings.ts', settings: MAIL_SETTINGS },
  { title: 'Notifications', source: 'src/notifications/settings.ts', settings: NOTIFICATION_SETTINGS },
] as const satisfies readonly SettingsTable[];

/** All groups as one set of declarations (a key declared by two groups is refused here). */
export const SETTINGS = SETTINGS_TABLES.reduce<Settings>((all, t) => {
  for (const key of Object.keys(t.settings)) if (key in all) throw new Error(`config key ${key} is declared twice`);
  return { ...all, ...t.settings };
}, {}) as UnionToIntersection<(typeof SETTINGS_TABLES)[number]['settings']>;

type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;

// The declarations listed here and the `Config` the settings files merge must be the same shape: a group missing from
// the list, or one not merged into Config, fails the type check here.
type Loaded = SettingsOf<typeof SETTINGS>;
const _sameShape: [Config, Loaded] extends [Loaded, Config] ? true : never = true;

/** Loads the configuration from the environment; `roleArg`, the CLI's first argument, overrides ROLE. The only reader of process.env. */
export function loadConfig(env: Env = process.env, roleArg?: string): Config {
  return loadSettings(SETTINGS, roleArg === undefined ? env : { ...env, ROLE: roleArg });
}

/** Every declared variable → [its default as docs/configuration.md shows it, without backticks; its meaning]. */
export const CONFIG_VARIABLES: Readonly<Record<string, readonly [string, string]>> = Object.fromEntries(
  declarations(SETTINGS).map((s) => [s.env, [defaultText(s).replaceAll('`', ''), s.description]] as const),
);

export type { Config, Role };
