// Certificate and CSR making on @peculiar/x509 (WebCrypto). Verification of what devices present
// is done with node:crypto's X509Certificate in verify.ts; this module only issues.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

// Node 24's global WebCrypto
const webcrypto = globalThis.crypto;
x509.cryptoProvider.set(webcrypto);

const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY_MS = 24 * 3600 * 1000;

export { x509 };

export interface IssuedCertificate {
  certificate: x509.X509Certificate;
  /** PKCS#8 PEM of the new key (absent when the key came from a CSR) */
  keyPem?: string;
}

/** The CA that signs: its certificate and its private key. */
export interface SigningCa {
  certificate: x509.X509Certificate;
  key: CryptoKey;
}

export async function generateKeyPair(): Promise<CryptoKeyPair> {
  return webcrypto.subtle.generateKey(EC_P256, true, ['sign', 'verify']) as Promise<CryptoKeyPair>;
}

export async function privateKeyPem(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

/** Imports an ECDSA P-256 PKCS#8 PEM private key for signing. */
export async function importPrivateKey(pem: string): Promise<CryptoKey> {
  const der = x509.PemConverter.decodeFirst(pem);
  return webcrypto.subtle.importKey('pkcs8', der, EC_P256, false, ['sign']);
}

function serialNumber(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] &= 0x7f; // positive
  bytes[0] |= 0x01; // and without a leading zero byte
  return Buffer.from(bytes).toString('hex');
}

/** `CN=a, O=b` with commas, quotes and backslashes in values escaped as RFC 4514 says. */
export function distinguishedName(parts: Record<string, string>): string {
  return Object.entries(parts)
    .map(([k, v]) => `${k}=${v.replace(/([,+"\\<>;=])/g, '\\$1')}`)
    .join(', ');
}

/** The development device CA: self-signed, ECDSA P-256, CA without path length limit. */
export async function createRootCa(subject: string, validDays: number): Promise<IssuedCertificate> {
  const keys = await generateKeyPair();
  const now = Date.now();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: subject,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + validDays * DAY_MS),
    signingAlgorithm: SIGNING,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certificate, keyPem: await privateKeyPem(keys.privateKey) };
}

interface IssueParams {
  ca: SigningCa;
  subject: string;
  publicKey: x509.PublicKey | CryptoKey;
  validDays: number;
  extensions: x509.Extension[];
}

async function issue(p: IssueParams): Promise<x509.X509Certificate> {
  const now = Date.now();
  // a certificate never outlives the CA that signs it
  const notAfter = Math.min(now + p.validDays * DAY_MS, p.ca.certificate.notAfter.getTime());
  return x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject: p.subject,
    issuer: p.ca.certificate.subjectName,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(notAfter),
    signingAlgorithm: SIGNING,
    publicKey: p.publicKey,
    signingKey: p.ca.key,
    extensions: [
      ...p.extensions,
      await x509.SubjectKeyIdentifierExtension.create(p.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(p.ca.certificate.publicKey),
    ],
  });
}

/** A TLS/DTLS server certificate with DNS and IP subject alternative names. */
export async function issueServerCertificate(ca: SigningCa, hosts: string[], validDays: number): Promise<IssuedCertificate> {
  const keys = await generateKeyPair();
  const names = hosts.map((h) => (/^[0-9.]+$/.test(h) || h.includes(':') ? { type: 'ip' as const, value: h } : { type: 'dns' as const, value: h }));
  const certificate = await issue({
    ca,
    subject: distinguishedName({ CN: hosts[0] ?? 'localhost', O: 'gridgate' }),
    publicKey: keys.publicKey,
    validDays,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(names),
    ],
  });
  return { certificate, keyPem: await privateKeyPem(keys.privateKey) };
}

/** A device (TLS client) certificate. */
export async function issueDeviceCertificate(ca: SigningCa, subject: string, validDays: number): Promise<IssuedCertificate> {
  const keys = await generateKeyPair();
  const certificate = await issue({
    ca,
    subject,
    publicKey: keys.publicKey,
    validDays,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
    ],
  });
  return { certificate, keyPem: await privateKeyPem(keys.privateKey) };
}

/**
 * An intermediate CA for a supplier, from its CSR: basicConstraints CA with pathLen 0 (it signs
 * device certificates only), keyUsage keyCertSign. The subject is the CSR's.
 */
export async function issueIntermediateCa(ca: SigningCa, csr: x509.Pkcs10CertificateRequest, validDays: number): Promise<x509.X509Certificate> {
  return issue({
    ca,
    subject: csr.subject,
    publicKey: csr.publicKey,
    validDays,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
    ],
  });
}
