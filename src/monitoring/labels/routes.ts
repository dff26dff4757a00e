import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { crudRoutes } from '../../http/crud.ts';
import { FindQuery } from '../../http/schemas.ts';
import { readRights } from '../graph-schemas.ts';
import { addLabel, deleteLabel, findLabels, getLabel, updateLabel } from './store.ts';

const LabelBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    color: Type.String({ pattern: '^#[0-9a-fA-F]{6}$', description: '#, followed by six hexadecimal characters' }),
  },
  { additionalProperties: false },
);
const LabelFind = Type.Object({ ...FindQuery.properties, sortBy: Type.Optional(Type.Union([Type.Literal('name'), Type.Literal('hashId')])) });

/** Labels that tag issues (issue add and update take labelHashIds): changed with ISSUES, read with READ. */
export async function labelRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  crudRoutes<Static<typeof LabelBody>, Partial<Static<typeof LabelBody>>>(app, {
    base: '/label/',
    noun: 'label',
    addBody: LabelBody,
    updateBody: Type.Partial(LabelBody),
    findQuery: LabelFind,
    rights: { monitoring: 'ISSUES' },
    readRights,
    operations: {
      add: async (env, body) => ({ hashId: await addLabel(ctx.db, env, body) }),
      find: (env, query) => findLabels(ctx.db, env, query),
      // the SDK's label get answers the label's hashId, name and color only
      get: async (env, hashId) => {
        const { name, color } = await getLabel(ctx.db, env, hashId);
        return { hashId, name, color };
      },
      update: (env, hashId, patch) => updateLabel(ctx.db, env, hashId, patch),
      remove: (env, hashId) => deleteLabel(ctx.db, env, hashId),
    },
  });
}
