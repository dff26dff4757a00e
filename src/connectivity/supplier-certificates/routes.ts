import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { crudRoutes } from '../../http/crud.ts';
import {
  addSupplierCertificate,
  deleteSupplierCertificate,
  findSupplierCertificates,
  getSupplierCertificate,
  updateSupplierCertificate,
  type SupplierCertificateInput,
  type SupplierCertificatePatch,
} from './store.ts';

const Name = Type.String({ minLength: 1, maxLength: 255 });
const Identifier = Type.String({ minLength: 1, maxLength: 1_000_000 });
// a PEM CSR of an EC or RSA-4096 key is 0.5 to 2 KiB
const Csr = Type.String({ minLength: 1, maxLength: 16_384 });

// name: the SDK's add has none (the certificate is then named after its CSR subject's CN); the seed's may carry one
const AddBody = Type.Object({ name: Type.Optional(Name), csr: Csr, identifier: Identifier }, { additionalProperties: false });
const UpdateBody = Type.Object({ name: Type.Optional(Name), identifier: Type.Optional(Identifier) }, { additionalProperties: false });

export async function supplierCertificateRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  crudRoutes<SupplierCertificateInput, SupplierCertificatePatch>(app, {
    base: '/supplier-certificate/',
    noun: 'supplier-certificate',
    rights: { connectivity: 'ENVIRONMENT_ADMIN' },
    addBody: AddBody,
    updateBody: UpdateBody,
    operations: {
      add: (env, body) => addSupplierCertificate(ctx, env, body),
      find: (env, query) => findSupplierCertificates(ctx, env, query),
      get: (env, hashId) => getSupplierCertificate(ctx, env, hashId),
      update: (env, hashId, patch) => updateSupplierCertificate(ctx, env, hashId, patch),
      remove: (env, hashId) => deleteSupplierCertificate(ctx, env, hashId),
    },
  });
}
