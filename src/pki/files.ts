// The service's certificate files in CERTS_DIR: the device CA (signs supplier intermediates and the
// server certificate), the server certificate for the TLS and DTLS device ports, and an example
// device certificate. Created by `npm run certs` (scripts/certs.ts) and, when missing, at start.
import { X509Certificate } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import type { Config } from '../app/config.ts';

export const CERT_FILES = {
  caCert: 'ca.pem',
  caKey: 'ca.key',
  serverCert: 'server.pem',
  serverKey: 'server.key',
  deviceCert: 'device.pem',
  deviceKey: 'device.key',
} as const;

const CA_DAYS = 3650;
const SERVER_DAYS = 825;
const DEVICE_DAYS = 825;
const LOCK_STALE_MS = 30_000;

/** What the device ports need: the server key and chain, and the device CA. */
export interface ServerCredentials {
  /** PKCS#8 PEM */
  key: string;
  /** PEM: the server certificate, then the CA */
  cert: string;
  /** node:crypto view of `cert`, server certificate first */
  chain: X509Certificate[];
  deviceCa: X509Certificate;
}

const file = (config: Pick<Config, 'certsDir'>, name: keyof typeof CERT_FILES) => path.join(config.certsDir, CERT_FILES[name]);

/** Every PEM certificate in `pem`, in order. */
export function parsePemChain(pem: string): X509Certificate[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((block) => new X509Certificate(block));
}

/** Reads the server key and chain and the device CA from CERTS_DIR; a clear error when they are missing. */
export function loadServerCredentials(config: Pick<Config, 'certsDir'>): ServerCredentials {
  for (const name of ['caCert', 'serverCert', 'serverKey'] as const) {
    if (!existsSync(file(config, name))) {
      throw new Error(`${file(config, name)} is missing: run "npm run certs" (or set CERTS_DIR to where the certificates are)`);
    }
  }
  const deviceCa = new X509Certificate(readFileSync(file(config, 'caCert')));
  const serverPem = readFileSync(file(config, 'serverCert'), 'utf8');
  const chain = parsePemChain(serverPem);
  return { key: readFileSync(file(config, 'serverKey'), 'utf8'), cert: serverPem, chain, deviceCa };
}

/** The device CA's certificate and private key (PEM), for signing supplier certificates. */
export function loadDeviceCaKeyPem(config: Pick<Config, 'certsDir'>): { certPem: string; keyPem: string } {
  const caKey = file(config, 'caKey');
  if (!existsSync(caKey)) throw new Error(`${caKey} is missing: this process cannot sign supplier certificates (run "npm run certs" or mount the CA key)`);
  return { certPem: readFileSync(file(config, 'caCert'), 'utf8'), keyPem: readFileSync(caKey, 'utf8') };
}

function writeAtomically(target: string, content: string, mode: number): void {
  const tmp = `${target}.${process.pid}.tmp`;
  writeFileSync(tmp, content, { mode });
  renameSync(tmp, target);
}

function readCert(p: string): X509Certificate | null {
  try {
    return new X509Certificate(readFileSync(p));
  } catch {
    return null;
  }
}

function signedBy(cert: X509Certificate | null, ca: X509Certificate): boolean {
  return !!cert && cert.checkIssued(ca) && cert.verify(ca.publicKey) && new Date(cert.validTo).getTime() > Date.now();
}

function coversHosts(cert: X509Certificate, hosts: string[]): boolean {
  return hosts.every((h) => (isIP(h) ? cert.checkIP(h) : cert.checkHost(h, { wildcards: false })) !== undefined);
}

async function withLock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  const lock = path.join(dir, '.certs.lock');
  for (let i = 0; ; i++) {
    try {
      closeSync(openSync(lock, 'wx'));
      break;
    } catch {
      // another process (a parallel test, a second role) is creating them: wait, or take over a stale lock
      try {
        if (Date.now() - statSync(lock).mtimeMs > LOCK_STALE_MS) unlinkSync(lock);
      } catch {
        /* gone meanwhile */
      }
      if (i > 300) throw new Error(`${lock} is held by another process`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  try {
    return await fn();
  } finally {
    try {
      unlinkSync(lock);
    } catch {
      /* already gone */
    }
  }
}

/** The host names and addresses the server certificate names: localhost, 127.0.0.1, ::1 and PUBLIC_HOST. */
export function serverHosts(config: { publicHost?: string | null }): string[] {
  return [...new Set(['localhost', '127.0.0.1', '::1', ...(config.publicHost ? [config.publicHost] : [])])];
}

/**
 * Creates what is missing or no longer fits in CERTS_DIR (idempotent): the device CA, the server
 * certificate (reissued when it does not chain to the CA, expired, or lacks a host), and the example
 * device certificate. Returns the names of the files written.
 */
export async function ensureCertificates(config: { certsDir: string; publicHost?: string | null }): Promise<string[]> {
  mkdirSync(config.certsDir, { recursive: true });
  const hosts = serverHosts(config);
  const upToDate = () => {
    const ca = readCert(file(config, 'caCert'));
    if (!ca || !existsSync(file(config, 'caKey'))) return false;
    const server = readCert(file(config, 'serverCert'));
    return (
      signedBy(server, ca) &&
      coversHosts(server!, hosts) &&
      existsSync(file(config, 'serverKey')) &&
      signedBy(readCert(file(config, 'deviceCert')), ca) &&
      existsSync(file(config, 'deviceKey'))
    );
  };
  if (upToDate()) return [];
  return withLock(config.certsDir, async () => {
    if (upToDate()) return [];
    // @peculiar/x509 only when something is to be made: a start with every file in place does not load it
    const { createRootCa, distinguishedName, importPrivateKey, issueDeviceCertificate, issueServerCertificate, x509 } = await import('./x509.ts');
    const written: string[] = [];
    let caPem: string;
    let caKeyPem: string;
    const existingCa = readCert(file(config, 'caCert'));
    if (existingCa && existsSync(file(config, 'caKey')) && new Date(existingCa.validTo).getTime() > Date.now()) {
      caPem = readFileSync(file(config, 'caCert'), 'utf8');
      caKeyPem = readFileSync(file(config, 'caKey'), 'utf8');
    } else {
      const root = await createRootCa(distinguishedName({ CN: 'gridgate development device CA', O: 'gridgate' }), CA_DAYS);
      caPem = root.certificate.toString('pem') + '\n';
      caKeyPem = root.keyPem!;
      writeAtomically(file(config, 'caKey'), caKeyPem, 0o600);
      writeAtomically(file(config, 'caCert'), caPem, 0o644);
      written.push(CERT_FILES.caCert, CERT_FILES.caKey);
    }
    const ca = { certificate: new x509.X509Certificate(caPem), key: await importPrivateKey(caKeyPem) };
    const caNode = new X509Certificate(caPem);
    const server = readCert(file(config, 'serverCert'));
    if (!signedBy(server, caNode) || !coversHosts(server!, hosts) || !existsSync(file(config, 'serverKey'))) {
      const issued = await issueServerCertificate(ca, hosts, SERVER_DAYS);
      writeAtomically(file(config, 'serverKey'), issued.keyPem!, 0o600);
      writeAtomically(file(config, 'serverCert'), `${issued.certificate.toString('pem')}\n${caPem}`, 0o644);
      written.push(CERT_FILES.serverCert, CERT_FILES.serverKey);
    }
    if (!signedBy(readCert(file(config, 'deviceCert')), caNode) || !existsSync(file(config, 'deviceKey'))) {
      const issued = await issueDeviceCertificate(ca, distinguishedName({ CN: 'example-device-1', O: 'gridgate example supplier' }), DEVICE_DAYS);
      writeAtomically(file(config, 'deviceKey'), issued.keyPem!, 0o600);
      writeAtomically(file(config, 'deviceCert'), `${issued.certificate.toString('pem')}\n`, 0o644);
      written.push(CERT_FILES.deviceCert, CERT_FILES.deviceKey);
    }
    return written;
  });
}
