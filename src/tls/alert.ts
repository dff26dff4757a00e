/** TLS alert protocol constants (RFC 5246 §7.2, RFC 4279 §2) and the error type used to signal them. */

export const AlertLevel = { warning: 1, fatal: 2 } as const;

export const AlertDescription = {
  close_notify: 0,
  unexpected_message: 10,
  bad_record_mac: 20,
  record_overflow: 22,
  handshake_failure: 40,
  illegal_parameter: 47,
  decode_error: 50,
  decrypt_error: 51,
  protocol_version: 70,
  internal_error: 80,
  no_renegotiation: 100,
  unknown_psk_identity: 115,
} as const;

const names = new Map<number, string>(Object.entries(AlertDescription).map(([k, v]) => [v, k]));

export function alertName(description: number): string {
  return names.get(description) ?? `alert_${description}`;
}

/** A protocol error that must be answered with a fatal alert carrying `description`. */
export class TlsAlert extends Error {
  readonly description: number;
  constructor(description: number, message?: string) {
    super(message ?? alertName(description));
    this.name = 'TlsAlert';
    this.description = description;
  }
}

/** Raised when the peer sent us a fatal alert. */
export class TlsPeerAlert extends Error {
  readonly description: number;
  constructor(description: number) {
    super(`peer sent fatal alert ${alertName(description)} (${description})`);
    this.name = 'TlsPeerAlert';
    this.description = description;
  }
}
