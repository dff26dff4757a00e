/** PSK identities over DTLS: an unknown one is answered as a wrong key would be, an over-long one is never looked up. */
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { MAX_PSK_IDENTITY_BYTES } from '../../src/dtls/limits.ts';
import { transcriptBytes } from '../../src/dtls/handshake.ts';
import { RecordLayer, parseDatagram } from '../../src/dtls/record.ts';
import { encodeClientHello, encodeClientKeyExchangePsk, parseServerHello } from '../../src/tls/messages.ts';
import { extendedMasterSecret, keyExpansion, pskPreMasterSecret, splitKeyBlock, verifyData } from '../../src/tls/prf.ts';
import { cipherSuiteById, keyBlockLength } from '../../src/tls/suites/index.ts';
import { RawPeer, clientHello, clientHelloDatagram } from './raw-client.ts';
import { IDENTITY, PSK_HEX, dtlsClient, perTest, startEchoServer, waitFor } from './helpers.ts';
import type { EchoServer } from './helpers.ts';

const CCM8 = 'PSK-AES128-CCM8:@SECLEVEL=0';
const KEY = Buffer.from(PSK_HEX, 'hex');

const t = perTest();

/** A server that records every identity it is asked to look up; `known` ones have KEY. */
async function serverWithLookups(known = [IDENTITY]): Promise<{ srv: EchoServer; lookups: string[] }> {
  const lookups: string[] = [];
  const s = await startEchoServer({
    lookupPsk: async (identity) => {
      lookups.push(identity);
      return known.includes(identity) ? KEY : null;
    },
  });
  return { srv: s, lookups };
}

/** Plaintext alerts (level, description) among datagrams the server sent. */
function alerts(sent: Buffer[]): number[][] {
  return sent
    .flatMap((d) => parseDatagram(d))
    .filter((r) => r.type === 21 && r.epoch === 0)
    .map((r) => [...r.fragment]);
}

/**
 * A full PSK handshake by hand (RFC primitives) naming `identity` with `psk`: the alerts the server answers flight 5
 * with, or 'established' when its answer is flight 6.
 */
async function handDriven(port: number, identity: Buffer, psk: Buffer): Promise<number[][] | 'established'> {
  const p = await new RawPeer(port).open();
  t.peers.push(p);
  const ch = clientHello();
  p.send(clientHelloDatagram(ch, 0, 0));
  await waitFor(() => p.received.length > 0);
  const ch2 = { ...ch, cookie: p.received.shift()!.fragments[0].body.subarray(3) };
  p.send(clientHelloDatagram(ch2, 1, 1));
  await waitFor(() => p.received.length > 0);
  const [shFrag, shdFrag] = p.received.shift()!.fragments;
  const sh = parseServerHello(shFrag.body);
  const suite = cipherSuiteById(sh.cipherSuite)!;
  const transcript = createHash('sha256');
  transcript.update(transcriptBytes({ type: 1, messageSeq: 1, body: encodeClientHello(ch2, { dtls: true }) }));
  for (const f of [shFrag, shdFrag]) transcript.update(transcriptBytes({ type: f.type, messageSeq: f.messageSeq, body: f.body }));
  const cke = { type: 16, messageSeq: 2, body: encodeClientKeyExchangePsk(identity) };
  transcript.update(transcriptBytes(cke));
  const master = extendedMasterSecret(pskPreMasterSecret(psk), transcript.copy().digest());
  const k = splitKeyBlock(keyExpansion(master, sh.random, ch.random, keyBlockLength(suite)), 0, 16, 4);
  const fin = { type: 20, messageSeq: 3, body: verifyData(master, 'client', transcript.digest()) };
  const rl = new RecordLayer();
  rl.setInitialWriteSequence(2);
  rl.installWriteEpoch(1, suite.createProtection(k.clientMacKey, k.clientKey, k.clientIv));
  p.send(Buffer.concat([rl.seal(0, 22, transcriptBytes(cke)), rl.seal(0, 20, Buffer.from([1])), rl.seal(1, 22, transcriptBytes(fin))]));
  const answer = await p.take((d) => d.records.some((r) => r.type === 21 || r.epoch === 1));
  return answer.records.some((r) => r.epoch === 1) ? 'established' : alerts([answer.datagram]);
}

describe('DTLS PSK identities', () => {
  it('an unknown identity is looked up and then answered exactly as a wrong key: the same alert after the client Finished', async () => {
    let lookups: string[];
    ({ srv: t.srv, lookups } = await serverWithLookups());
    const wrongKey = await dtlsClient({ port: t.srv.port, cipher: CCM8, pskHex: 'ffeeddccbbaa99887766554433221100', timeoutMs: 5000 });
    await waitFor(() => t.srv!.errors.length === 1);
    const afterWrongKey = t.srv.sent.length;
    const unknown = await dtlsClient({ port: t.srv.port, cipher: CCM8, identity: 'nobody', timeoutMs: 5000 });
    await waitFor(() => t.srv!.errors.length === 2);
    expect([wrongKey.echoed, unknown.echoed]).toEqual([false, false]);
    expect(unknown.stderr).not.toContain('unknown psk identity');
    expect(alerts(t.srv.sent.slice(afterWrongKey))).toEqual(alerts(t.srv.sent.slice(0, afterWrongKey)));
    expect(alerts(t.srv.sent.slice(afterWrongKey))).toEqual([[2, 20]]); // fatal bad_record_mac
    expect(lookups).toEqual([IDENTITY, 'nobody']);
    expect(t.srv.errors[1].info.pskIdentity).toBe('nobody');
    expect(t.srv.sessions).toEqual([]);
  });

  it('an identity of MAX_PSK_IDENTITY_BYTES is looked up and works; one byte longer is never looked up and is answered as a wrong key', async () => {
    const longest = 'i'.repeat(MAX_PSK_IDENTITY_BYTES);
    const tooLong = 'i'.repeat(MAX_PSK_IDENTITY_BYTES + 1);
    let lookups: string[];
    ({ srv: t.srv, lookups } = await serverWithLookups([longest, tooLong]));
    expect(await handDriven(t.srv.port, Buffer.from(longest), KEY)).toBe('established');
    expect(await handDriven(t.srv.port, Buffer.from(tooLong), KEY)).toEqual([[2, 20]]);
    expect(await handDriven(t.srv.port, Buffer.from(longest), Buffer.alloc(16))).toEqual([[2, 20]]); // a wrong key, for comparison
    expect(lookups).toEqual([longest, longest]);
    await waitFor(() => t.srv!.errors.length === 2);
    expect(t.srv.errors[0].info.pskIdentity).toBeUndefined();
  });
});
