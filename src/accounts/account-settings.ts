// The accounts' settings: machine logins (token lifetime, failure limits), people's console sessions and the origin
// their mails link to, environments added through the API, and where settings feedback is mailed. Declared once:
// `Config`'s fields and the table in docs/configuration.md come from these declarations.
import { API_PORT } from '../app/config.ts';
import type { Settings, SettingsOf } from '../app/settings.ts';

/** PUBLIC_URL without its trailing slash; unset, this host's API port on localhost. */
function publicUrl(raw: string | undefined, apiPort: number): string {
  if (raw === undefined) return `http://localhost:${apiPort}`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`PUBLIC_URL must be an http or https URL such as https://console.example.com, got "${raw}"`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '') {
    throw new Error(`PUBLIC_URL must be an http or https URL without query or fragment, got "${raw}"`);
  }
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '');
}

export const ACCOUNTS_SETTINGS = {
  tokenLifetimeSeconds: {
    kind: 'int',
    env: 'TOKEN_LIFETIME_SECONDS',
    default: 2_592_000,
    min: 60,
    max: 2 ** 31,
    note: '30 days',
    description: 'lifetime of a machine login token',
  },
  loginFailuresPerAddress: {
    kind: 'int',
    env: 'LOGIN_FAILURES_PER_ADDRESS',
    default: 30,
    min: 1,
    max: 2 ** 31,
    description:
      'failed machine logins and two-factor checks (get-keyuri, enable, disable) from one source address within `LOGIN_FAILURE_WINDOW_SECONDS`; further attempts get `429 rate_limit_error` with `Retry-After`',
  },
  loginFailuresPerAccount: {
    kind: 'int',
    env: 'LOGIN_FAILURES_PER_ACCOUNT',
    default: 10,
    min: 1,
    max: 2 ** 31,
    description:
      'failed machine logins and two-factor checks for one account (from any address) within `LOGIN_FAILURE_WINDOW_SECONDS`; further attempts get `429 rate_limit_error`',
  },
  loginFailureWindowSeconds: {
    kind: 'int',
    env: 'LOGIN_FAILURE_WINDOW_SECONDS',
    default: 300,
    min: 1,
    max: 86_400,
    description: 'the window those counts run in (Redis, from the first failure); a successful login does not count',
  },
  publicUrl: {
    kind: 'custom',
    env: 'PUBLIC_URL',
    accepts: 'an http(s) URL without query or fragment',
    defaultText: 'unset → `http://localhost:API_PORT`',
    description:
      "the origin (`scheme://host[:port]`, optionally a path) people reach the console at: invitation and password reset mails link to `PUBLIC_URL/#/set-password?token=…`. Never taken from a request's `Host` header, which whoever asks for a reset mail could choose. Its origin is accepted as the `Origin` of a console request (besides the request's own), and an `https` PUBLIC_URL makes the session cookie `Secure`: for TLS ended in front of the API",
    parse: (raw, ctx): string => publicUrl(raw, ctx.get(API_PORT)),
  },
  sessionIdleMinutes: {
    kind: 'int',
    env: 'SESSION_IDLE_MINUTES',
    default: 30,
    min: 1,
    max: 7 * 24 * 60,
    description: "a person's console session (cookie `gridgate_session`) ends after this long without a request ([People and sessions](#people-and-sessions))",
  },
  sessionAbsoluteHours: {
    kind: 'int',
    env: 'SESSION_ABSOLUTE_HOURS',
    default: 12,
    min: 1,
    max: 24 * 366,
    description: "a person's console session ends this long after the login at the latest, however active",
  },
  environmentAddLimit: {
    kind: 'int',
    env: 'ENVIRONMENT_ADD_LIMIT',
    default: 20,
    min: 0,
    max: 1_000_000,
    description:
      'environments (monitoring and connectivity) the accounts of one environment the operator made, and of the environments they added, may add through environment add and supplier add; more are answered 400 parameter_error',
  },
  feedbackMailTo: {
    kind: 'list',
    env: 'FEEDBACK_MAIL_TO',
    defaultText: 'empty → feedback is stored only',
    description:
      'comma-separated addresses of the operator that settings feedback (POST /settings/feedback) is mailed to, through the mail queue; it is stored in the feedback table either way',
  },
} as const satisfies Settings;

declare module '../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof ACCOUNTS_SETTINGS> {}
}
