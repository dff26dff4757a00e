// The gateway's settings: the device ports (HTTPS, CoAP over DTLS, plain CoAP), their per-address admission, what a
// device request may carry and how long it waits, the server certificate's directory and name, and the firmware cache.
// Declared once: `Config`'s fields and the table in docs/configuration.md come from these declarations.
import type { Settings, SettingsOf } from '../app/settings.ts';
import { COAP_DEFAULTS } from '../coap/config.ts';

export const GATEWAY_SETTINGS = {
  certsDir: {
    kind: 'path',
    env: 'CERTS_DIR',
    default: './certs',
    description:
      'the device CA, the server certificate of the device ports and an example device certificate: `npm run certs` creates what is missing (so does `npm start`); see `certs/README.md`',
  },
  publicHost: {
    kind: 'str',
    env: 'PUBLIC_HOST',
    accepts: 'a host name',
    default: 'localhost',
    description:
      'the host name third parties and devices reach the device ports at: webhook URLs are `https://PUBLIC_HOST:HTTPS_DEVICE_PORT/webhook/<hashId>/<secret>`, and the server certificate `npm run certs` makes names it (besides localhost, 127.0.0.1, ::1)',
  },
  httpsDevicePort: { kind: 'int', env: 'HTTPS_DEVICE_PORT', default: 8443, min: 0, max: 65_535, description: 'device HTTPS (TLS 1.2 PSK)' },
  /** per-source-address admission on HTTPS_DEVICE_PORT (src/gateway/https.ts), with src/dtls/limits.ts's primitives */
  httpsLimits: {
    kind: 'group',
    settings: {
      maxConnectionsPerAddress: {
        kind: 'int',
        env: 'HTTPS_MAX_CONNECTIONS_PER_ADDRESS',
        default: 1000,
        min: 1,
        max: 2 ** 31,
        description:
          'open connections per source IP address on the device HTTPS port, handshaking or established (cellular devices often share a carrier NAT address, hence not lower); a connection beyond it is closed at once',
      },
      handshakeRatePerAddress: {
        kind: 'int',
        env: 'HTTPS_HANDSHAKE_RATE_PER_ADDRESS',
        default: 100,
        min: 1,
        max: 2 ** 31,
        description: 'new connections (each a TLS handshake) per second per source IP address on the device HTTPS port (token bucket refill)',
      },
      handshakeBurstPerAddress: {
        kind: 'int',
        env: 'HTTPS_HANDSHAKE_BURST_PER_ADDRESS',
        default: 200,
        min: 1,
        max: 2 ** 31,
        description: 'new connections a source IP address may open at once on the device HTTPS port (token bucket size)',
      },
    },
  },
  coapsPort: {
    kind: 'int',
    env: 'COAPS_PORT',
    default: 5684,
    min: 0,
    max: 65_535,
    description: 'CoAP over DTLS 1.2: PSK (the same `/device/psk` devices as HTTPS) and certificate devices (server certificate from `CERTS_DIR`)',
  },
  coapPort: {
    kind: 'int',
    env: 'COAP_PORT',
    default: null,
    min: 0,
    max: 65_535,
    defaultText: 'unset → off',
    description: 'plain CoAP, opt-in, for development and private networks; never anonymous (below)',
  },
  coapPlainIdentities: {
    kind: 'list',
    env: 'COAP_PLAIN_IDENTITIES',
    defaultText: 'unset → none',
    description:
      'comma-separated PSK identities allowed on plain CoAP; such a device names itself with the Uri-Query `psk-identity=<identity>` (its handler does not see it); every other plain request gets `4.01` (its JSON body only when no larger than the request). Anyone who reaches the port can claim a listed identity',
  },
  coapPiggybackMs: {
    kind: 'int',
    env: 'COAP_PIGGYBACK_MS',
    default: COAP_DEFAULTS.piggybackMs,
    min: 0,
    max: 60_000,
    description:
      'a CoAP answer ready within this window rides on the ACK; a later one gets an empty ACK first and follows as a Confirmable response (retransmitted per RFC 7252). A request that carries Block2 always gets its answer on the ACK (libcoap ≤ 4.3.1 clients drop a separate response that starts a Block2 transfer)',
  },
  dtlsKeepSessions: {
    kind: 'onOff',
    env: 'DTLS_KEEP_SESSIONS',
    default: true,
    description:
      '`on` or `off`: established DTLS sessions (sealed with `SECRET_KEY`) and the resumption cache live in Redis, so a restarted gateway or another node carries them on without a handshake ([decisions](decisions.md))',
  },
  deviceBodyLimitBytes: {
    kind: 'int',
    env: 'DEVICE_BODY_LIMIT_BYTES',
    default: 65_536,
    min: 1,
    max: 64 * 1024 * 1024,
    description:
      'largest device request body (`413` above; a sender still writing a refused body has it read and dropped, up to 32 MiB, so it gets the answer)',
  },
  gatewayWaitMs: {
    kind: 'int',
    env: 'GATEWAY_WAIT_MS',
    default: 5000,
    min: 10,
    max: 120_000,
    description: 'how long a device request waits for its handler; after that it gets `202` and the job stays queued',
  },
  firmwareCacheBytes: {
    kind: 'int',
    env: 'FIRMWARE_CACHE_BYTES',
    default: 67_108_864,
    min: 0,
    max: 2 ** 31,
    note: '64 MiB',
    description:
      'memory a gateway process keeps hot firmware images in, by sha256 (least recently used out); larger images are read range by range from PostgreSQL',
  },
} as const satisfies Settings;

declare module '../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof GATEWAY_SETTINGS> {}
}
