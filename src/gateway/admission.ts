/**
 * Device admission, one place for every device listener (HTTPS, coaps, plain CoAP; a cluster node's too): the key of
 * a PSK identity for the handshake, the device an identity stands for, what a device whose type was deleted is
 * counted as when it makes contact, and how a failed handshake is counted.
 */
import type { AppContext } from '../app/context.ts';
import { metrics } from '../app/metrics.ts';
import { countHandshakeFailure } from '../connectivity/counters/handshake.ts';
import { countDeviceEvent } from '../connectivity/counters/recorder.ts';
import { lookupPskCredential } from '../connectivity/devices/credentials.ts';
import type { CertificateView } from '../sandbox/types.ts';

export type DeviceProtocol = 'https' | 'coaps' | 'coap';

/**
 * The device a connection or session stands for: by its PSK identity, or by its client certificate (then
 * `certificate` is what its handler sees). `refused`: the device's type was deleted; it authenticates, and every
 * request is refused (HTTPS 403, CoAP 4.03) with REFUSED_MESSAGE.
 */
export interface AdmittedDevice {
  deviceHashId: string;
  environmentHashId: string;
  pskIdentity?: string;
  certificate?: CertificateView;
  refused: boolean;
}

/** What a device whose type was deleted is told. */
export const REFUSED_MESSAGE = 'The device type of this device was deleted: the device no longer has access';

/**
 * The `lookupPsk` of a TLS or DTLS PSK server: the key of an identity, or null. A device whose type was deleted
 * still completes its handshake (and is then refused with a reason, rather than failing the handshake unexplained).
 */
export function pskKeyLookup(ctx: AppContext): (identity: string) => Promise<Buffer | null> {
  return async (identity) => (await lookupPskCredential(ctx, identity, { includeRefused: true }))?.key ?? null;
}

/** The device PSK identity `identity` names; null when it names none. */
export async function pskDevice(ctx: AppContext, identity: string): Promise<AdmittedDevice | null> {
  const cred = await lookupPskCredential(ctx, identity, { includeRefused: true });
  return cred ? { deviceHashId: cred.deviceHashId, environmentHashId: cred.environmentHashId, pskIdentity: identity, refused: cred.refused } : null;
}

/**
 * A device whose type was deleted made contact: a contact and a refused contact on its counters, and the refused
 * metric. (The worker counts the contacts it runs a handler for; the gateway those it answers itself.)
 */
export function countRefusedContact(ctx: AppContext, protocol: DeviceProtocol, deviceHashId: string): void {
  countDeviceEvent(ctx, deviceHashId, 'contacts');
  countDeviceEvent(ctx, deviceHashId, 'refusedContacts');
  metrics.refused.inc({ protocol, reason: 'device_type_deleted' });
}

/**
 * A handshake or authentication that failed: the listener's metric, and `handshakeFailures` on the device whose PSK
 * identity the peer named (none when it named none, or one that is no device's).
 */
export function countHandshakeFailed(ctx: AppContext, protocol: DeviceProtocol, pskIdentity?: string): void {
  metrics.handshakeFailures.inc({ protocol });
  countHandshakeFailure(ctx, pskIdentity);
}
