/**
 * Flight 5's last message: the client's Finished, whose verify_data must be the PRF of the master secret over the
 * transcript so far (RFC 5246 §7.4.9), compared in constant time. A wrong PSK shows here.
 */
import { timingSafeEqual } from 'node:crypto';
import { AlertDescription, TlsAlert } from '../../tls/alert.ts';
import { parseFinished } from '../../tls/messages.ts';
import { verifyData, type PrfSecret } from '../../tls/prf.ts';

export function checkClientFinished(master: PrfSecret, transcriptHash: Buffer, body: Buffer): void {
  if (!timingSafeEqual(verifyData(master, 'client', transcriptHash), parseFinished(body))) {
    throw new TlsAlert(AlertDescription.decrypt_error, 'client Finished mismatch');
  }
}
