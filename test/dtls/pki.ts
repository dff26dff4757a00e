/**
 * Throwaway test PKI made with the openssl CLI in a temp dir: a root CA, an intermediate CA, the DTLS server's
 * certificate (SAN 127.0.0.1/localhost), devices issued by the root and by the intermediate, an expired device, a
 * certificate "issued" by a device (not a CA), a device of a rogue CA nobody trusts, and three a device port must refuse
 * although each chains to the root: a CA certificate used as a device's, a device certificate for servers only
 * (extendedKeyUsage serverAuth), and a device under a CA that the intermediate (pathlen 0) may not issue. All keys EC P-256.
 */
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestPki {
  dir: string;
  /** Absolute path of `<name>.pem` / `<name>.key`. */
  pem(name: string): string;
  key(name: string): string;
  cert(name: string): X509Certificate;
  read(file: string): string;
  remove(): void;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

function keyPair(dir: string, name: string): void {
  openssl(dir, ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', `${name}.key`]);
}

function rootCa(dir: string, name: string, cn: string): void {
  keyPair(dir, name);
  openssl(dir, [
    'req',
    '-x509',
    '-new',
    '-key',
    `${name}.key`,
    '-subj',
    `/CN=${cn}`,
    '-days',
    '3',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-out',
    `${name}.pem`,
  ]);
}

function issue(dir: string, name: string, cn: string, issuer: string, o: { days?: number; ext: string }): void {
  keyPair(dir, name);
  openssl(dir, ['req', '-new', '-key', `${name}.key`, '-subj', `/CN=${cn}`, '-out', `${name}.csr`]);
  writeFileSync(join(dir, `${name}.ext`), o.ext);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${issuer}.pem`,
    '-CAkey',
    `${issuer}.key`,
    '-CAcreateserial',
    '-days',
    String(o.days ?? 2),
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.pem`,
  ]);
}

const LEAF = 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n';

export function makeTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'dtls-pki-'));
  rootCa(dir, 'ca', 'Test Device CA');
  issue(dir, 'inter', 'Test Supplier CA', 'ca', { ext: 'basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n' });
  issue(dir, 'server', 'gridgate test server', 'ca', { ext: `${LEAF}subjectAltName=IP:127.0.0.1,DNS:localhost\n` });
  issue(dir, 'device', 'device-cert-1', 'ca', { ext: LEAF });
  issue(dir, 'device2', 'device-of-supplier', 'inter', { ext: LEAF });
  issue(dir, 'expired', 'device-expired', 'ca', { days: -1, ext: LEAF });
  issue(dir, 'minted', 'device-minted-by-a-device', 'device', { ext: LEAF }); // issuer is not a CA
  issue(dir, 'ca-device', 'device-that-is-a-ca', 'ca', { ext: 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,digitalSignature,keyCertSign\n' });
  issue(dir, 'server-only', 'device-for-servers-only', 'ca', { ext: `${LEAF}extendedKeyUsage=serverAuth\n` });
  issue(dir, 'sub', 'Test Sub-supplier CA', 'inter', { ext: 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n' });
  issue(dir, 'device3', 'device-past-pathlen', 'sub', { ext: LEAF });
  rootCa(dir, 'rogue', 'Rogue CA');
  issue(dir, 'stranger', 'device-of-rogue', 'rogue', { ext: LEAF });
  const read = (f: string): string => readFileSync(join(dir, f), 'utf8');
  return {
    dir,
    pem: (n) => join(dir, `${n}.pem`),
    key: (n) => join(dir, `${n}.key`),
    cert: (n) => new X509Certificate(read(`${n}.pem`)),
    read,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
