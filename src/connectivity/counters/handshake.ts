import type { AppContext } from '../../app/context.ts';
import { lookupPskCredential } from '../devices/credentials.ts';
import { countDeviceEvent } from './recorder.ts';

/**
 * A handshake that failed after the peer named `pskIdentity` (wrong key, aborted, timed out)
 * counts as `handshakeFailures` on that identity's device; an unknown identity counts nowhere.
 * For the TLS and DTLS listeners' failure events; never throws.
 */
export function countHandshakeFailure(ctx: AppContext, pskIdentity: string | undefined): void {
  if (pskIdentity === undefined) return;
  lookupPskCredential(ctx, pskIdentity, { includeRefused: true }).then(
    (cred) => {
      if (cred) countDeviceEvent(ctx, cred.deviceHashId, 'handshakeFailures');
    },
    () => undefined,
  );
}
