// Notifications' settings: how often a recipient is mailed about issues, and a subscriber about failures of supplier
// objects. Declared once: `Config`'s fields and the table in docs/configuration.md come from these declarations.
import type { Settings, SettingsOf } from '../app/settings.ts';

export const NOTIFICATION_SETTINGS = {
  notificationDigestSeconds: {
    kind: 'int',
    env: 'NOTIFICATION_DIGEST_SECONDS',
    default: 300,
    min: 0,
    max: 86_400,
    description:
      'a recipient gets at most one issue mail per this window: the first issue event is mailed at once, the later ones of the window together in one digest mail at its end (`0`: every event its own mail)',
  },
  notificationAlertQuietSeconds: {
    kind: 'int',
    env: 'NOTIFICATION_ALERT_QUIET_SECONDS',
    default: 3600,
    min: 0,
    max: 604_800,
    description:
      'a subscriber of a supplier object (device type, report type, webhook, certificate) gets its first failure alert at once, the next no sooner than this after the last one, summing up the failures since',
  },
} as const satisfies Settings;

declare module '../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof NOTIFICATION_SETTINGS> {}
}
