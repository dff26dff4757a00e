// The mail queue's settings: the SMTP server, the sender, and how a mail the server did not take is retried. Declared
// once: `Config`'s fields and the table in docs/configuration.md come from these declarations.
import type { Settings, SettingsOf } from '../app/settings.ts';

export const MAIL_SETTINGS = {
  smtpUrl: {
    kind: 'str',
    env: 'SMTP_URL',
    accepts: 'an smtp:// or smtps:// URL',
    default: null,
    defaultText: 'unset → mail is logged (info) and stored as failed, not sent',
    description:
      "SMTP server (`smtp://user:pass@host:587`, `smtps://...`) for every mail: issue notifications, supplier alerts, and the mail each `email` address of a command gets when the device's handler marks it sent (see *Notifications* below)",
  },
  mailFrom: { kind: 'str', env: 'MAIL_FROM', accepts: 'a mail address', default: 'gridgate <noreply@localhost>', description: 'sender of that mail' },
  mailRetryBaseMs: {
    kind: 'int',
    env: 'MAIL_RETRY_BASE_MS',
    default: 1000,
    min: 1,
    max: 3_600_000,
    description:
      "first retry of a mail the SMTP server did not take (unreachable, or a 4xx reply), doubling per try up to `MAIL_RETRY_MAX_MS`, without end: an outage delays mail, never drops it. A 5xx reply fails the mail for good, with the server's reply as its reason",
  },
  mailRetryMaxMs: {
    kind: 'int',
    env: 'MAIL_RETRY_MAX_MS',
    default: 300_000,
    min: 1,
    max: 86_400_000,
    description: 'longest wait between two tries of one mail',
  },
} as const satisfies Settings;

declare module '../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof MAIL_SETTINGS> {}
}
