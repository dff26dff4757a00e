import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { Theme } from '../../http/schemas.ts';
import { environmentView } from './view.ts';
import { supplierView } from '../routes.ts';
import { DEFAULTS as NEW_ACCOUNT_SETTINGS } from '../user-environment-settings.ts';
import { addEnvironmentFor, deleteSupplier, updateSupplier } from './store.ts';

const Name = Type.String({ minLength: 1, maxLength: 255 });
const AddBody = Type.Object({ name: Name }, { additionalProperties: false });
const SupplierUpdateBody = Type.Object(
  {
    name: Type.Optional(Name),
    enforceTwoFactorAuthentication: Type.Optional(Type.Boolean()),
    theme: Type.Optional(Type.Union([Theme, Type.Null()])),
  },
  { additionalProperties: false },
);

const ADD_NOTE =
  "Any logged-in account may add one. The caller's account stays in its own environment: the answer also holds `machineAccount` " +
  '{hashId, assertion}, an account of the new environment with every right of its type (log in with the assertion; it is shown once). ' +
  'At most ENVIRONMENT_ADD_LIMIT per customer: 400 parameter_error beyond.';
const supplierRights = { connectivity: 'ENVIRONMENT_ADMIN' };

/** environment add, supplier add / update / delete (environment update and delete live in monitoring/environments/). */
export async function environmentAddRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  const add = (type: 'monitoring' | 'connectivity', name: string, account: Parameters<typeof addEnvironmentFor>[2]) =>
    addEnvironmentFor(ctx.db, ctx.config.environmentAddLimit, account, type, name);

  app.post(
    '/environment/',
    {
      config: { auth: 'account' },
      schema: { tags: ['environment'], summary: 'environment add', body: AddBody, description: `Creates a monitoring environment. ${ADD_NOTE}` },
    },
    async (request) => {
      const { environment, rights, machineAccount } = await add('monitoring', request.body.name, request.account);
      return { environment: environmentView(environment), environmentRights: rights, userEnvironmentSettings: { ...NEW_ACCOUNT_SETTINGS }, machineAccount };
    },
  );

  app.post(
    '/supplier/',
    {
      config: { auth: 'account' },
      schema: { tags: ['supplier'], summary: 'supplier add', body: AddBody, description: `Creates a connectivity environment. ${ADD_NOTE}` },
    },
    async (request) => {
      const { environment, rights, machineAccount } = await add('connectivity', request.body.name, request.account);
      return { supplier: supplierView(environment), supplierRights: rights, machineAccount };
    },
  );

  app.put(
    '/supplier/',
    {
      config: { rights: supplierRights },
      schema: { tags: ['supplier'], summary: 'supplier update', body: SupplierUpdateBody },
    },
    async (request, reply) => {
      await updateSupplier(ctx.db, request.account.environment, request.body);
      reply.status(204).send();
    },
  );

  app.delete(
    '/supplier/',
    {
      config: { rights: supplierRights },
      schema: {
        tags: ['supplier'],
        summary: 'supplier delete',
        description:
          'No account reaches the connectivity environment afterwards; its devices, certificates and webhooks are refused. 409 conflict_error while one of its devices is claimed by a monitoring environment.',
      },
    },
    async (request, reply) => {
      await deleteSupplier(ctx, request.account.environment);
      reply.status(204).send();
    },
  );
}
