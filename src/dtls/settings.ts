// The DTLS server's configurable limits (DTLS_*), declared once: `DTLS_DEFAULTS` (limits.ts), `config.dtls` and the
// table in docs/configuration.md all come from these declarations. Plain data: the kernel's settings kit is imported
// for its types only (src/app/settings.ts says why).
import type { IntSetting, Settings, SettingsOf } from '../app/settings.ts';

/** The limits, by their name in `DtlsLimits`. */
export const DTLS_LIMIT_SETTINGS = {
  maxSessions: {
    kind: 'int',
    env: 'DTLS_MAX_SESSIONS',
    default: 10_000,
    min: 1,
    max: 2 ** 31,
    description: 'established DTLS sessions at most; handshakes beyond it are dropped',
  },
  maxHandshakes: {
    kind: 'int',
    env: 'DTLS_MAX_HANDSHAKES',
    default: 1000,
    min: 1,
    max: 2 ** 31,
    description:
      'DTLS handshakes in progress at most (counted after the stateless cookie check); when all are taken, a handshake from an address holding fewer takes the oldest slot of the address holding the most, so hosts that stall after the cookie cannot lock other addresses out',
  },
  maxSessionsPerAddress: {
    kind: 'int',
    env: 'DTLS_MAX_SESSIONS_PER_ADDRESS',
    default: 1000,
    min: 1,
    max: 2 ** 31,
    description: 'DTLS sessions per source IP address (cellular devices often share a carrier NAT address, hence not lower)',
  },
  handshakeRatePerAddress: {
    kind: 'int',
    env: 'DTLS_HANDSHAKE_RATE_PER_ADDRESS',
    default: 100,
    min: 1,
    max: 2 ** 31,
    description: 'DTLS handshakes per second per source IP address (token bucket refill)',
  },
  handshakeBurstPerAddress: {
    kind: 'int',
    env: 'DTLS_HANDSHAKE_BURST_PER_ADDRESS',
    default: 200,
    min: 1,
    max: 2 ** 31,
    description: 'DTLS handshakes a source IP address may start at once (token bucket size)',
  },
  handshakeTimeoutMs: {
    kind: 'int',
    env: 'DTLS_HANDSHAKE_TIMEOUT_MS',
    default: 30_000,
    min: 1000,
    max: 2 ** 31,
    description: 'a DTLS handshake not complete after this long is abandoned',
  },
  idleTimeoutMs: {
    kind: 'int',
    env: 'DTLS_IDLE_TIMEOUT_MS',
    default: 600_000,
    min: 1000,
    max: 2 ** 31,
    description: 'a DTLS session without an authentic record for this long is closed (the device resumes or handshakes again)',
  },
  mtu: {
    kind: 'int',
    env: 'DTLS_MTU',
    default: 1200,
    min: 256,
    max: 65_000,
    description: 'largest datagram the DTLS server sends; its flights are fragmented to fit',
  },
  receiveBufferBytes: {
    kind: 'int',
    env: 'DTLS_RECEIVE_BUFFER_BYTES',
    default: 4 * 1024 * 1024,
    min: 65_536,
    max: 2 ** 30,
    description:
      "receive buffer of the DTLS socket, capped by the kernel's `net.core.rmem_max` (Debian's default is 212992: raise it with sysctl for the full effect). The kernel's default buffer overflows under a ClientHello flood whenever the event loop pauses, and then drops devices' datagrams as much as the flood's (see the flood rows of `npm run bench`)",
  },
} as const satisfies Record<string, IntSetting>;

/** `config.dtls`: the limits of the DTLS server behind COAPS_PORT. */
export const DTLS_SETTINGS = { dtls: { kind: 'group', settings: DTLS_LIMIT_SETTINGS } } as const satisfies Settings;

declare module '../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof DTLS_SETTINGS> {}
}
