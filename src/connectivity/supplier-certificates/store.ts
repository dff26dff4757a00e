// Supplier certificates: a supplier sends a PKCS#10 CSR of its own key; the device CA signs it as an
// intermediate CA (pathLen 0) the supplier then signs its device certificates with. Devices under it
// are identified by the certificate's `identifier` function. A change reloads the trust anchors.
// A key is certified once: while a supplier certificate of it lives (in any environment), a CSR of it is refused.
import { X509Certificate, createHash, createPublicKey, type KeyObject } from 'node:crypto';
import type { AppContext } from '../../app/context.ts';
import { softDelete, type Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { loadDeviceCaKeyPem } from '../../pki/files.ts';
import { importPrivateKey, issueIntermediateCa, x509 } from '../../pki/x509.ts';
import { compileOnSave } from '../user-code.ts';

/** `name` is optional: no SDK release since 2020 sends one (then the CSR subject's CN names it). */
export interface SupplierCertificateInput {
  name?: string;
  csr: string;
  identifier: string;
}
export interface SupplierCertificatePatch {
  name?: string;
  identifier?: string;
}

/** The SDK's SupplierCertificate. */
export interface SupplierCertificate {
  hashId: string;
  name: string;
  certificate: string;
  createdAt: Date;
}

/** How long a supplier certificate is valid (never beyond the device CA). */
const VALID_DAYS = 3650;

type Row = Record<string, unknown>;
const toCertificate = (r: Row): SupplierCertificate => ({
  hashId: r.hash_id as string,
  name: r.name as string,
  certificate: r.certificate as string,
  createdAt: r.created_at as Date,
});

/** SHA-256 (hex) of a public key's SubjectPublicKeyInfo as node encodes it, so a CSR's and a certificate's compare equal. */
function publicKeySha256(key: KeyObject): string {
  return createHash('sha256')
    .update(key.export({ type: 'spki', format: 'der' }))
    .digest('hex');
}

/**
 * Refuses a key that a live supplier certificate already has (in any environment: a device chain signed by that key
 * would match both anchors). Runs in the add's transaction, under a lock every add takes, so two adds of one key
 * cannot both pass. Certificates stored before the key column are read too, and get theirs recorded when the add commits.
 */
async function refuseCertifiedKey(client: Queryable, environmentId: number, keySha256: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock(hashtextextended('gridgate:supplier-certificate-keys', 0))");
  const { rows } = await client.query<{ id: string; hash_id: string; environment_id: string; certificate: string; public_key_sha256: string | null }>(
    `SELECT s.id, s.hash_id, s.environment_id, s.certificate, s.public_key_sha256
       FROM supplier_certificate s JOIN environment e ON e.id = s.environment_id
      WHERE s.deleted_at IS NULL AND e.deleted_at IS NULL AND (s.public_key_sha256 = $1 OR s.public_key_sha256 IS NULL)
      ORDER BY s.id`,
    [keySha256],
  );
  for (const r of rows) {
    let hash = r.public_key_sha256;
    if (hash === null) {
      hash = publicKeySha256(new X509Certificate(r.certificate).publicKey);
      await client.query('UPDATE supplier_certificate SET public_key_sha256 = $2 WHERE id = $1', [r.id, hash]);
    }
    if (hash !== keySha256) continue;
    // another environment's certificate is not named (its hashId is that tenant's business)
    const which =
      Number(r.environment_id) === environmentId ? `supplier certificate ${r.hash_id} of this environment` : 'a supplier certificate of another environment';
    throw new ParameterError(
      `csr: its public key is already certified by ${which}; a key is certified once (delete that certificate first, or make a new key)`,
      { field: 'csr' },
    );
  }
}

/** The CSR as a verified request: PEM, PKCS#10, self-signature good, a key the device ports can use. */
async function readCsr(pem: string): Promise<{ csr: x509.Pkcs10CertificateRequest; key: KeyObject }> {
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(pem.trim());
  } catch {
    throw new ParameterError('csr must be a PEM encoded PKCS#10 certificate signing request (-----BEGIN CERTIFICATE REQUEST-----)', { field: 'csr' });
  }
  let signed: boolean;
  try {
    signed = await csr.verify();
  } catch {
    signed = false;
  }
  if (!signed) throw new ParameterError('csr: its signature does not verify with the public key it carries', { field: 'csr' });
  const key = createPublicKey({ key: Buffer.from(csr.publicKey.rawData), format: 'der', type: 'spki' });
  const d = key.asymmetricKeyDetails ?? {};
  const ok =
    (key.asymmetricKeyType === 'ec' && ['prime256v1', 'secp384r1'].includes(d.namedCurve ?? '')) ||
    (key.asymmetricKeyType === 'rsa' && (d.modulusLength ?? 0) >= 2048);
  if (!ok) {
    throw new ParameterError(
      `csr: the key must be ECDSA P-256 or P-384, or RSA of at least 2048 bits (got ${key.asymmetricKeyType} ${d.namedCurve ?? d.modulusLength ?? ''})`.trim(),
      { field: 'csr' },
    );
  }
  if (csr.subjectName.toJSON().length === 0) throw new ParameterError('csr: the subject is empty; give it at least a CN', { field: 'csr' });
  return { csr, key };
}

/** The name of a certificate added without one: its subject's common name, else the whole subject (at most 255 characters). */
function defaultName(csr: x509.Pkcs10CertificateRequest): string {
  const cn = csr.subjectName.getField('CN').find((v) => v.trim() !== '');
  return (cn ?? csr.subjectName.toString()).slice(0, 255);
}

export async function addSupplierCertificate(
  ctx: AppContext,
  environmentId: number,
  input: SupplierCertificateInput,
): Promise<{ hashId: string; certificate: string }> {
  const identifierHash = await compileOnSave(ctx.config.supplierCode, 'identifier', input.identifier, environmentId);
  const { csr, key } = await readCsr(input.csr);
  const { certPem, keyPem } = loadDeviceCaKeyPem(ctx.config);
  const ca = { certificate: new x509.X509Certificate(certPem), key: await importPrivateKey(keyPem) };
  if (csr.subjectName.toString() === ca.certificate.subjectName.toString()) {
    throw new ParameterError("csr: the subject must differ from the device CA's", { field: 'csr' });
  }
  const issued = await issueIntermediateCa(ca, csr, VALID_DAYS);
  const certificate = `${issued.toString('pem')}\n`;
  const hashId = newHashId();
  const name = input.name ?? defaultName(csr);
  const keySha256 = publicKeySha256(key);
  await ctx.db.tx(async (client) => {
    await refuseCertifiedKey(client, environmentId, keySha256);
    await client.query(
      `INSERT INTO supplier_certificate (hash_id, environment_id, name, certificate, fingerprint, identifier, identifier_hash, public_key_sha256)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [hashId, environmentId, name, certificate, new X509Certificate(certificate).fingerprint256, input.identifier, identifierHash, keySha256],
    );
  });
  await ctx.changes.publish('trust', { environmentIds: [environmentId] });
  return { hashId, certificate };
}

export async function findSupplierCertificates(ctx: AppContext, environmentId: number, query: FindQuery) {
  const page = await findPage(
    ctx.db,
    {
      from: 'supplier_certificate s',
      select: 's.id, s.hash_id, s.name, s.certificate, s.created_at',
      idColumn: 's.id',
      where: ['s.environment_id = $1', 's.deleted_at IS NULL'],
      params: [environmentId],
      sortable: { hashId: 's.hash_id', name: 's.name' },
      search: ['s.name', 's.hash_id'],
      updatedColumn: 's.updated_at',
    },
    query,
  );
  return {
    nextPageOffset: page.nextPageOffset,
    rows: page.rows.map((r) => ({ certificate: { hashId: r.hash_id as string, name: r.name as string, createdAt: r.created_at as Date } })),
  };
}

export async function getSupplierCertificate(
  ctx: AppContext,
  environmentId: number,
  hashId: string,
): Promise<{ certificate: SupplierCertificate; identifier: string }> {
  const { rows } = await ctx.db.query(
    'SELECT hash_id, name, certificate, identifier, created_at FROM supplier_certificate WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL',
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('supplierCertificate', hashId);
  return { certificate: toCertificate(rows[0]), identifier: rows[0].identifier as string };
}

export async function updateSupplierCertificate(ctx: AppContext, environmentId: number, hashId: string, patch: SupplierCertificatePatch): Promise<void> {
  const identifierHash = patch.identifier === undefined ? null : await compileOnSave(ctx.config.supplierCode, 'identifier', patch.identifier, environmentId);
  const { rowCount } = await ctx.db.query(
    `UPDATE supplier_certificate SET name = COALESCE($3, name), identifier = COALESCE($4, identifier),
       identifier_hash = COALESCE($5, identifier_hash), updated_at = now()
     WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL`,
    [environmentId, hashId, patch.name ?? null, patch.identifier ?? null, identifierHash],
  );
  if (!rowCount) throw new NotFoundError('supplierCertificate', hashId);
  if (patch.identifier !== undefined) await ctx.changes.publish('trust', { environmentIds: [environmentId] });
}

/** Soft delete: the certificate stops being a trust anchor, so its devices can no longer connect. */
export async function deleteSupplierCertificate(ctx: AppContext, environmentId: number, hashId: string): Promise<void> {
  await softDelete(ctx.db, 'supplier_certificate', 'supplierCertificate', environmentId, hashId);
  await ctx.changes.publish('trust', { environmentIds: [environmentId] });
}
