import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface CurlResult {
  code: number;
  status: number;
  body: string;
  stderr: string;
}

/** curl over real TLS to the device port; `code` is curl's exit code (0: an HTTP answer came back). */
export function curl(url: string, opts: { cacert: string; cert?: string; key?: string; data?: string; method?: string }): Promise<CurlResult> {
  const args = ['-sS', '--max-time', '15', '--cacert', opts.cacert, '-o', '-', '-w', '\n%{http_code}'];
  if (opts.cert) args.push('--cert', opts.cert);
  if (opts.key) args.push('--key', opts.key);
  if (opts.method) args.push('-X', opts.method);
  if (opts.data !== undefined) args.push('-H', 'content-type: application/json', '--data-binary', opts.data);
  args.push(url);
  return new Promise((resolve) => {
    execFile('curl', args, { encoding: 'utf8' }, (err, stdout, stderr) => {
      const i = stdout.lastIndexOf('\n');
      resolve({
        code: err ? Number((err as { code?: number }).code ?? 1) : 0,
        status: Number(stdout.slice(i + 1)) || 0,
        body: stdout.slice(0, Math.max(i, 0)),
        stderr,
      });
    });
  });
}

export function run(cmd: string, args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { encoding: 'utf8', timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

export const tempDir = (prefix = 'gridgate-pki-') => mkdtempSync(path.join(os.tmpdir(), prefix));

/** An ECDSA P-256 key and a CSR for `subject` made with the openssl CLI, as a supplier would. */
export async function opensslCsr(dir: string, name: string, subject: string): Promise<{ key: string; csrPem: string }> {
  const key = path.join(dir, `${name}.key`);
  const csr = path.join(dir, `${name}.csr`);
  await run('openssl', ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
  const r = await run('openssl', ['req', '-new', '-key', key, '-subj', subject, '-out', csr]);
  if (r.code !== 0) throw new Error(r.stderr);
  const { readFileSync } = await import('node:fs');
  return { key, csrPem: readFileSync(csr, 'utf8') };
}

/**
 * A device key and certificate signed by `caCert`/`caKey` (a supplier's intermediate), with openssl.
 * `days` may be negative for an expired certificate (faked via -not_before/-not_after).
 */
export async function opensslDeviceCert(
  dir: string,
  name: string,
  subject: string,
  caCert: string,
  caKey: string,
  opts: { expired?: boolean; extendedKeyUsage?: string; ca?: boolean } = {},
): Promise<{ cert: string; key: string }> {
  const key = path.join(dir, `${name}.key`);
  const csr = path.join(dir, `${name}.csr`);
  const cert = path.join(dir, `${name}.pem`);
  const ext = path.join(dir, `${name}.ext`);
  // `ca`: a CA certificate (one that could sign further certificates) where a device certificate belongs
  const constraints = opts.ca
    ? 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,digitalSignature,keyCertSign'
    : 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature';
  writeFileSync(ext, `${constraints}\nextendedKeyUsage=${opts.extendedKeyUsage ?? 'clientAuth'}\n`);
  await run('openssl', ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
  let r = await run('openssl', ['req', '-new', '-key', key, '-subj', subject, '-out', csr]);
  if (r.code !== 0) throw new Error(r.stderr);
  if (opts.expired) {
    // openssl ca can backdate; x509 -req cannot: a minimal ca config in the temp dir
    const db = path.join(dir, `${name}.db`);
    writeFileSync(db, '');
    const conf = path.join(dir, `${name}.cnf`);
    writeFileSync(
      conf,
      `[ca]\ndefault_ca=d\n[d]\ndatabase=${db}\nnew_certs_dir=${dir}\nserial=${path.join(dir, `${name}.srl`)}\ndefault_md=sha256\npolicy=p\nunique_subject=no\n[p]\ncommonName=supplied\n[x]\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n`,
    );
    writeFileSync(path.join(dir, `${name}.srl`), '1000\n');
    r = await run('openssl', [
      'ca',
      '-batch',
      '-config',
      conf,
      '-extensions',
      'x',
      '-cert',
      caCert,
      '-keyfile',
      caKey,
      '-in',
      csr,
      '-out',
      cert,
      '-startdate',
      '20200101000000Z',
      '-enddate',
      '20210101000000Z',
      '-notext',
    ]);
  } else {
    r = await run('openssl', ['x509', '-req', '-in', csr, '-CA', caCert, '-CAkey', caKey, '-CAcreateserial', '-days', '30', '-extfile', ext, '-out', cert]);
  }
  if (r.code !== 0) throw new Error(r.stderr);
  return { cert, key };
}
