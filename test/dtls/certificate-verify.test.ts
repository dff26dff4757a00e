/**
 * ECDHE_ECDSA flight 5 driven by hand (openssl and gnutls refuse to sign with a key that does not match their
 * certificate): a CertificateVerify made with the wrong key is refused with decrypt_error; the same flight signed
 * with the right key completes the handshake and carries data (the control that shows the test can pass).
 */
import { createECDH, createHash, createPrivateKey, sign, X509Certificate } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HandshakeReassembler, parseHandshakeFragments, transcriptBytes } from '../../src/dtls/handshake.ts';
import type { HandshakeMessage } from '../../src/dtls/handshake.ts';
import { RecordLayer } from '../../src/dtls/record.ts';
import { encodeCertificate } from '../../src/tls/ecdhe-ecdsa.ts';
import { extendedMasterSecret, keyExpansion, splitKeyBlock, verifyData } from '../../src/tls/prf.ts';
import { TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8 } from '../../src/tls/ecdhe-ecdsa.ts';
import { parseServerHello } from '../../src/tls/messages.ts';
import { RawPeer, clientHello, clientHelloDatagram } from './raw-client.ts';
import { startEchoServer, waitFor } from './helpers.ts';
import type { EchoServer } from './helpers.ts';
import { makeTestPki } from './pki.ts';
import type { TestPki } from './pki.ts';

let pki: TestPki;
let srv: EchoServer | undefined;
const peers: RawPeer[] = [];
beforeAll(() => {
  pki = makeTestPki();
});
afterAll(() => pki.remove());
afterEach(async () => {
  await srv?.server.close();
  srv = undefined;
  for (const p of peers.splice(0)) p.close();
});

const EXTS = [
  { type: 23, data: Buffer.alloc(0) }, // extended_master_secret
  { type: 10, data: Buffer.from('00020017', 'hex') }, // supported_groups: secp256r1
  { type: 11, data: Buffer.from('0100', 'hex') }, // ec_point_formats: uncompressed
  { type: 13, data: Buffer.from('00020403', 'hex') }, // signature_algorithms: ecdsa_secp256r1_sha256
];

async function handshake(signingKey: string): Promise<{ peer: RawPeer; finish: () => Promise<Buffer | undefined> }> {
  srv = await startEchoServer({ certificate: { key: pki.read('server.key'), chain: pki.read('server.pem'), trustAnchors: () => [pki.cert('ca')] } });
  const p = await new RawPeer(srv.port).open();
  peers.push(p);
  const ch = { ...clientHello(), cipherSuites: [0xc0ae], extensions: EXTS };
  p.send(clientHelloDatagram(ch, 0, 0));
  await waitFor(() => p.received.length > 0);
  const cookie = p.received.shift()!.fragments[0].body.subarray(3);
  const ch2 = { ...ch, cookie };
  const ch2Datagram = clientHelloDatagram(ch2, 1, 1);
  p.send(ch2Datagram);

  // Flight 4, reassembled: ServerHello, Certificate, ServerKeyExchange, CertificateRequest, ServerHelloDone.
  const reasm = new HandshakeReassembler(1);
  const flight: HandshakeMessage[] = [];
  while (flight.length < 5) {
    const d = await p.take(() => true);
    for (const f of d.fragments) reasm.push(f);
    for (let m = reasm.next(); m; m = reasm.next()) flight.push(m);
  }
  expect(flight.map((m) => m.type)).toEqual([2, 11, 12, 13, 14]);
  const sh = parseServerHello(flight[0].body);
  const ske = flight[2].body;
  const serverPoint = ske.subarray(4, 4 + ske[3]);

  const log: Buffer[] = [
    transcriptBytes({ type: 1, messageSeq: 1, body: parseHandshakeFragments(ch2Datagram.subarray(13))[0].body }),
    ...flight.map(transcriptBytes),
  ];
  const device = new X509Certificate(pki.read('device.pem'));
  const certMsg = { type: 11, messageSeq: 2, body: encodeCertificate([device.raw]) };
  const ecdh = createECDH('prime256v1');
  const point = ecdh.generateKeys();
  const cke = { type: 16, messageSeq: 3, body: Buffer.concat([Buffer.from([point.length]), point]) };
  log.push(transcriptBytes(certMsg), transcriptBytes(cke));
  const sessionHash = createHash('sha256').update(Buffer.concat(log)).digest();
  const sig = sign('sha256', Buffer.concat(log), createPrivateKey(pki.read(signingKey)));
  const cv = { type: 15, messageSeq: 4, body: Buffer.concat([Buffer.from([0x04, 0x03, sig.length >> 8, sig.length & 0xff]), sig]) };
  log.push(transcriptBytes(cv));

  const master = extendedMasterSecret(ecdh.computeSecret(serverPoint), sessionHash);
  const k = splitKeyBlock(keyExpansion(master, sh.random, ch.random, 40), 0, 16, 4);
  const rl = new RecordLayer();
  rl.setInitialWriteSequence(2);
  const suite = TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8;
  rl.installWriteEpoch(1, suite.createProtection(k.clientMacKey, k.clientKey, k.clientIv));
  rl.installReadEpoch(1, suite.createProtection(k.serverMacKey, k.serverKey, k.serverIv));
  p.send(Buffer.concat([rl.seal(0, 22, transcriptBytes(certMsg)), rl.seal(0, 22, transcriptBytes(cke)), rl.seal(0, 22, transcriptBytes(cv))]));

  const finish = async (): Promise<Buffer | undefined> => {
    const fin = { type: 20, messageSeq: 5, body: verifyData(master, 'client', createHash('sha256').update(Buffer.concat(log)).digest()) };
    p.send(Buffer.concat([rl.seal(0, 20, Buffer.from([1])), rl.seal(1, 22, transcriptBytes(fin))]));
    await p.take((d) => d.records.some((r) => r.epoch === 1));
    await waitFor(() => srv!.sessions.length === 1);
    p.send(rl.seal(1, 23, Buffer.from('signed right')));
    const got = await p.take((d) => d.records.some((r) => r.type === 23));
    const plain = rl.open(got.records.find((r) => r.type === 23)!);
    return Buffer.isBuffer(plain) ? plain : undefined;
  };
  return { peer: p, finish };
}

describe('client CertificateVerify', () => {
  it("signed with a key other than the certificate's: fatal decrypt_error, handshakeError, no session", async () => {
    const { peer } = await handshake('stranger.key');
    const alert = await peer.take((d) => d.records.some((r) => r.type === 21));
    expect([...alert.records.find((r) => r.type === 21)!.fragment]).toEqual([2, 51]);
    await waitFor(() => srv!.errors.length > 0);
    expect(srv!.errors[0].err.message).toMatch(/CertificateVerify/);
    expect(srv!.sessions).toEqual([]);
  });

  it('signed with the device key: the handshake completes and data is echoed (control)', async () => {
    const { finish } = await handshake('device.key');
    expect(await finish()).toEqual(Buffer.from('echo:signed right'));
    expect(srv!.sessions[0].peerCertificates.map((c) => c.subject)).toEqual(['CN=device-cert-1']);
  });
});
