// The Subject[][] the certificate identifier function sees (UDF-CONTRACT.md §2): the subject
// attributes of each certificate of the verified chain, read from the DER so that attribute types
// without a short name keep their OID and values that are not strings arrive as hex.
import type { X509Certificate } from 'node:crypto';
import type { Subject } from '../sandbox/types.ts';

const SHORT_NAMES: Record<string, string> = {
  '2.5.4.3': 'CN',
  '2.5.4.4': 'SN',
  '2.5.4.5': 'serialNumber',
  '2.5.4.6': 'C',
  '2.5.4.7': 'L',
  '2.5.4.8': 'ST',
  '2.5.4.9': 'street',
  '2.5.4.10': 'O',
  '2.5.4.11': 'OU',
  '2.5.4.12': 'title',
  '2.5.4.17': 'postalCode',
  '2.5.4.42': 'GN',
  '2.5.4.43': 'initials',
  '2.5.4.44': 'generationQualifier',
  '2.5.4.46': 'dnQualifier',
  '2.5.4.65': 'pseudonym',
  '2.5.4.97': 'organizationIdentifier',
  '0.9.2342.19200300.100.1.25': 'DC',
  '0.9.2342.19200300.100.1.1': 'UID',
  '1.2.840.113549.1.9.1': 'emailAddress',
};

interface Tlv {
  tag: number;
  start: number;
  contentStart: number;
  end: number;
}

function readTlv(der: Buffer, offset: number, limit: number): Tlv {
  if (offset + 2 > limit) throw new Error('truncated DER');
  const tag = der[offset];
  let len = der[offset + 1];
  let p = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || p + n > limit) throw new Error('bad DER length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + der[p + i];
    p += n;
  }
  if (p + len > limit) throw new Error('truncated DER');
  return { tag, start: offset, contentStart: p, end: p + len };
}

function children(der: Buffer, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let p = parent.contentStart; p < parent.end;) {
    const t = readTlv(der, p, parent.end);
    out.push(t);
    p = t.end;
  }
  return out;
}

function decodeOid(bytes: Buffer): string {
  const parts: number[] = [];
  let v = 0;
  for (const b of bytes) {
    v = v * 128 + (b & 0x7f);
    if (!(b & 0x80)) {
      if (parts.length === 0) parts.push(v < 80 ? Math.floor(v / 40) : 2, v < 80 ? v % 40 : v - 80);
      else parts.push(v);
      v = 0;
    }
  }
  return parts.join('.');
}

function decodeValue(der: Buffer, t: Tlv): Subject['value'] {
  const content = der.subarray(t.contentStart, t.end);
  switch (t.tag) {
    case 0x0c: // UTF8String
    case 0x13: // PrintableString
    case 0x16: // IA5String
    case 0x12: // NumericString
    case 0x1a: // VisibleString
      return { encoding: 'utf8', value: content.toString('utf8') };
    case 0x14: // TeletexString, in practice latin1
      return { encoding: 'utf8', value: content.toString('latin1') };
    case 0x1e: {
      // BMPString: UTF-16BE
      const le = Buffer.from(content);
      le.swap16();
      return { encoding: 'utf8', value: le.toString('utf16le') };
    }
    case 0x1c: {
      // UniversalString: UTF-32BE
      let s = '';
      for (let i = 0; i + 4 <= content.length; i += 4) s += String.fromCodePoint(content.readUInt32BE(i));
      return { encoding: 'utf8', value: s };
    }
    default: // not a string: the whole DER element, so its type stays visible
      return { encoding: 'hex', value: der.subarray(t.start, t.end).toString('hex') };
  }
}

/** The subject attributes of one certificate, in their DER order. */
export function subjectOf(cert: X509Certificate): Subject[] {
  const der = cert.raw;
  const certificate = readTlv(der, 0, der.length);
  const tbs = children(der, certificate)[0];
  const fields = children(der, tbs);
  // tbsCertificate: [0] version (optional), serialNumber, signature, issuer, validity, subject, ...
  const subject = fields[fields[0].tag === 0xa0 ? 5 : 4];
  const out: Subject[] = [];
  for (const rdn of children(der, subject)) {
    for (const atv of children(der, rdn)) {
      const [type, value] = children(der, atv);
      const oid = decodeOid(der.subarray(type.contentStart, type.end));
      out.push({ key: { encoding: 'utf8', value: SHORT_NAMES[oid] ?? oid }, value: decodeValue(der, value) });
    }
  }
  return out;
}

/** `subjects[i]` = attributes of certificate i of the chain, the device's own first. */
export function chainSubjects(chain: X509Certificate[]): Subject[][] {
  return chain.map(subjectOf);
}
