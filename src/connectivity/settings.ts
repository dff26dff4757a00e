// Connectivity's settings: dry runs of supplier code, live log streams and firmware images. Declared once: `Config`'s
// fields and the table in docs/configuration.md come from these declarations.
import type { Settings, SettingsOf } from '../app/settings.ts';

export const CONNECTIVITY_SETTINGS = {
  dryRunsPerMinute: {
    kind: 'int',
    env: 'DRY_RUNS_PER_MINUTE',
    default: 60,
    min: 1,
    max: 1_000_000,
    description:
      "dry runs of supplier code (`POST …/dry-run`) one environment may start per minute, sustained (its token bucket's refill; `429 rate_limit_error` with `Retry-After` beyond)",
  },
  dryRunBurst: {
    kind: 'int',
    env: 'DRY_RUN_BURST',
    default: 10,
    min: 1,
    max: 1_000_000,
    description: 'dry runs one environment may start at once (the size of that bucket, kept in Redis so every API process shares it)',
  },
  liveLogStreamsPerEnvironment: {
    kind: 'int',
    env: 'LIVE_LOG_STREAMS_PER_ENVIRONMENT',
    default: 20,
    min: 1,
    max: 10_000,
    description:
      'live log streams (`GET /supplier-activity/stream`, server-sent events) one environment may hold open at once, counted in Redis over every API process; one more gets `429 rate_limit_error`. A stream whose process died stops counting within 45 s',
  },
  firmwareMaxBytes: {
    kind: 'int',
    env: 'FIRMWARE_MAX_BYTES',
    default: 8_388_608,
    min: 1,
    max: 1024 * 1024 * 1024,
    note: '8 MiB',
    description: 'largest firmware image (decoded); `POST /firmware/` takes a body of up to its base64 size plus 64 KiB',
  },
} as const satisfies Settings;

declare module '../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof CONNECTIVITY_SETTINGS> {}
}
