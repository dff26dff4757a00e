import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { crudRoutes } from '../../http/crud.ts';
import { addWebhook, deleteWebhook, findWebhooks, getWebhook, updateWebhook, type WebhookInput, type WebhookPatch } from './store.ts';

// limits of the SDK's supplier-webhook routes
const Name = Type.String({ minLength: 1, maxLength: 255 });
const Identifier = Type.String({ minLength: 1, maxLength: 1_000_000 });

const AddBody = Type.Object({ name: Name, identifier: Identifier }, { additionalProperties: false });
const UpdateBody = Type.Object({ name: Type.Optional(Name), identifier: Type.Optional(Identifier) }, { additionalProperties: false });

export async function webhookRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  crudRoutes<WebhookInput, WebhookPatch>(app, {
    base: '/supplier-webhook/',
    noun: 'supplier-webhook',
    rights: { connectivity: 'ENVIRONMENT_ADMIN' },
    addBody: AddBody,
    updateBody: UpdateBody,
    operations: {
      add: (env, body) => addWebhook(ctx, env, body),
      find: (env, query) => findWebhooks(ctx, env, query),
      get: (env, hashId) => getWebhook(ctx, env, hashId),
      update: (env, hashId, patch) => updateWebhook(ctx, env, hashId, patch),
      remove: (env, hashId) => deleteWebhook(ctx, env, hashId),
    },
  });
}
