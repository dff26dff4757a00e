import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { chainSubjects, subjectOf } from '../../src/pki/subjects.ts';
import { verifyChain } from '../../src/pki/verify.ts';
import { opensslDeviceCert, run, tempDir } from './support.ts';

let dir: string;
const ca = { cert: '', key: '' };
const cert = (p: string) => new X509Certificate(readFileSync(p));

async function selfSignedCa(name: string, subject: string): Promise<{ cert: string; key: string }> {
  const key = path.join(dir, `${name}.key`);
  const out = path.join(dir, `${name}.pem`);
  const r = await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '30',
    '-subj',
    subject,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign',
    '-keyout',
    key,
    '-out',
    out,
  ]);
  if (r.code !== 0) throw new Error(r.stderr);
  return { cert: out, key };
}

beforeAll(async () => {
  dir = tempDir();
  Object.assign(ca, await selfSignedCa('ca', '/CN=Test CA'));
});

describe('verifyChain', () => {
  it('accepts a device certificate signed by an anchor and returns [device, anchor]', async () => {
    const dev = await opensslDeviceCert(dir, 'ok', '/CN=ok', ca.cert, ca.key);
    const check = verifyChain([cert(dev.cert)], [cert(ca.cert)]);
    expect(check.ok).toBe(true);
    if (check.ok) expect(check.chain.map((c) => c.subject)).toEqual(['CN=ok', 'CN=Test CA']);
  });

  it('refuses an anchor look-alike (same name, other key), an expired certificate, a CA as device, and an intermediate that is not an anchor', async () => {
    const twin = await selfSignedCa('twin', '/CN=Test CA');
    const byTwin = await opensslDeviceCert(dir, 'by-twin', '/CN=by-twin', twin.cert, twin.key);
    const r1 = verifyChain([cert(byTwin.cert), cert(twin.cert)], [cert(ca.cert)]);
    expect(r1).toMatchObject({ ok: false, problem: 'untrusted', reason: expect.stringContaining('not signed directly by a trusted certificate') });

    const old = await opensslDeviceCert(dir, 'old', '/CN=old', ca.cert, ca.key, { expired: true });
    expect(verifyChain([cert(old.cert)], [cert(ca.cert)])).toMatchObject({
      ok: false,
      problem: 'validity',
      reason: expect.stringContaining('expired on 2021-01-01'),
    });
    expect(verifyChain([cert(ca.cert)], [cert(ca.cert)])).toMatchObject({
      ok: false,
      problem: 'unsuitable',
      reason: expect.stringContaining('CA certificate'),
    });
    // a certificate meant for servers only
    const serverOnly = await opensslDeviceCert(dir, 'server-only', '/CN=server-only', ca.cert, ca.key, { extendedKeyUsage: 'serverAuth' });
    expect(verifyChain([cert(serverOnly.cert)], [cert(ca.cert)])).toMatchObject({
      ok: false,
      problem: 'unsuitable',
      reason: expect.stringContaining('clientAuth'),
    });
    expect(verifyChain([], [cert(ca.cert)])).toEqual({ ok: false, problem: 'missing', reason: 'no client certificate' });

    // an intermediate under the anchor that is not itself an anchor (a deleted supplier certificate) is not trusted
    const interKey = path.join(dir, 'inter.key');
    const interCsr = path.join(dir, 'inter.csr');
    const inter = path.join(dir, 'inter.pem');
    const ext = path.join(dir, 'inter.ext');
    writeFileSync(ext, 'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign\n');
    await run('openssl', ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', interKey]);
    await run('openssl', ['req', '-new', '-key', interKey, '-subj', '/CN=Intermediate', '-out', interCsr]);
    await run('openssl', ['x509', '-req', '-in', interCsr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-days', '30', '-extfile', ext, '-out', inter]);
    const underInter = await opensslDeviceCert(dir, 'under-inter', '/CN=under', inter, interKey);
    expect(verifyChain([cert(underInter.cert), cert(inter)], [cert(ca.cert)]).ok).toBe(false);
    expect(verifyChain([cert(underInter.cert)], [cert(ca.cert), cert(inter)]).ok).toBe(true);
  });

  it('refuses a device certificate two anchors could have signed (one key, one name), whichever comes first', async () => {
    const dev = await opensslDeviceCert(dir, 'of-twins', '/CN=of-twins', ca.cert, ca.key);
    const twin = path.join(dir, 'same-key.pem');
    const r = await run('openssl', [
      'req',
      '-x509',
      '-new',
      '-key',
      ca.key,
      '-subj',
      '/CN=Test CA',
      '-days',
      '30',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign',
      '-out',
      twin,
    ]);
    expect(r.code).toBe(0);
    expect(verifyChain([cert(dev.cert)], [cert(ca.cert), cert(twin)])).toMatchObject({ ok: false, problem: 'ambiguous' });
    expect(verifyChain([cert(dev.cert)], [cert(twin), cert(ca.cert)])).toMatchObject({ ok: false, problem: 'ambiguous' });
    expect(verifyChain([cert(dev.cert)], [cert(twin)]).ok).toBe(true); // each alone signs it
  });
});

describe('chain subjects (UDF-CONTRACT Subject)', () => {
  it('short names, dotted OIDs for the rest, strings of every kind as utf8, non-strings as hex DER', async () => {
    const key = path.join(dir, 'subj.key');
    const out = path.join(dir, 'subj.pem');
    const conf = path.join(dir, 'subj.cnf');
    // string_mask nombstr: PrintableString, and a T61String for the non-ASCII CN; a serialNumber; an OID without a short name
    writeFileSync(
      conf,
      [
        '[req]',
        'distinguished_name=dn',
        'prompt=no',
        'string_mask=nombstr',
        '[dn]',
        'C=NL',
        'O=Acme B.V.',
        'CN=sensor-ü-1',
        'serialNumber=SN-42',
        '0.1.3.6.1.4.1.99999.1=custom',
        '',
      ].join('\n'),
    );
    const r = await run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-config',
      conf,
      '-utf8',
      '-keyout',
      key,
      '-out',
      out,
    ]);
    expect(r.code, r.stderr).toBe(0);
    const subject = subjectOf(cert(out));
    expect(subject.map((a) => a.key.value)).toEqual(['C', 'O', 'CN', 'serialNumber', '1.3.6.1.4.1.99999.1']);
    expect(subject.map((a) => a.value)).toEqual([
      { encoding: 'utf8', value: 'NL' },
      { encoding: 'utf8', value: 'Acme B.V.' },
      { encoding: 'utf8', value: 'sensor-ü-1' },
      { encoding: 'utf8', value: 'SN-42' },
      { encoding: 'utf8', value: 'custom' },
    ]);
    expect(chainSubjects([cert(out), cert(ca.cert)])[1]).toEqual([{ key: { encoding: 'utf8', value: 'CN' }, value: { encoding: 'utf8', value: 'Test CA' } }]);
  });

  it('an attribute whose value is not a string arrives as hex of its DER element', async () => {
    // build a certificate whose subject carries an INTEGER: openssl's ASN1 generator
    const key = path.join(dir, 'int.key');
    const out = path.join(dir, 'int.pem');
    const conf = path.join(dir, 'int.cnf');
    writeFileSync(conf, ['[req]', 'distinguished_name=dn', 'prompt=no', '[dn]', 'CN=int-device', ''].join('\n'));
    await run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-config',
      conf,
      '-keyout',
      key,
      '-out',
      out,
    ]);
    // patch the CN's string into a BIT STRING (tag 0x03, first content byte 0 = no unused bits): no longer a string
    const der = cert(out).raw;
    const cnOid = Buffer.from([0x06, 0x03, 0x55, 0x04, 0x03]);
    let i = der.indexOf(cnOid);
    i = der.indexOf(cnOid, i + 1); // the subject's CN (the issuer's comes first)
    const tagAt = i + cnOid.length;
    expect([0x0c, 0x13]).toContain(der[tagAt]);
    const patched = Buffer.from(der);
    patched[tagAt] = 0x03;
    patched[tagAt + 2] = 0x00;
    // the signature no longer matches, but subjects are read from any parsed certificate
    const parsed = new X509Certificate(patched);
    expect(subjectOf(parsed)).toEqual([
      { key: { encoding: 'utf8', value: 'CN' }, value: { encoding: 'hex', value: `030a00${Buffer.from('nt-device').toString('hex')}` } },
    ]);
  });
});
