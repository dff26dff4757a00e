/**
 * Flight 2: HelloVerifyRequest (RFC 6347 §4.2.1), the server's answer to a ClientHello without a valid cookie.
 * Sent statelessly: record sequence number and message_seq copied from the ClientHello, version DTLS 1.0 as
 * §4.2.1 recommends for compatibility, and no larger than the ClientHello (no amplification).
 */
import { HandshakeType } from '../../tls/messages.ts';
import { encodeFragment } from '../handshake.ts';
import { ContentType, DTLS10, encodeRecord } from '../record.ts';

export function helloVerifyRequestDatagram(cookie: Buffer, clientHelloRecordSeq: number, clientHelloMessageSeq: number): Buffer {
  const body = Buffer.allocUnsafe(3 + cookie.length);
  body.writeUInt16BE(DTLS10, 0);
  body[2] = cookie.length;
  cookie.copy(body, 3);
  const msg = encodeFragment(HandshakeType.hello_verify_request, clientHelloMessageSeq, body.length, 0, body);
  return encodeRecord({ type: ContentType.handshake, version: DTLS10, epoch: 0, seq: clientHelloRecordSeq, fragment: msg });
}
