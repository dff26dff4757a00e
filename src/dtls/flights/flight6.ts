/**
 * Flight 6: ChangeCipherSpec + Finished, sent once the client's Finished verified. The Finished goes out in
 * epoch 1 under the server write keys.
 */
import { HandshakeType } from '../../tls/messages.ts';
import { serverFinishedData } from '../../tls/psk-handshake.ts';
import type { PrfSecret } from '../../tls/prf.ts';
import type { HandshakeMessage } from '../handshake.ts';

export function flight6Finished(master: PrfSecret, transcriptHash: Buffer, messageSeq: number): HandshakeMessage {
  return { type: HandshakeType.finished, messageSeq, body: serverFinishedData(master, transcriptHash) };
}
