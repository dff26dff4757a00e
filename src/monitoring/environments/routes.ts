import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { FieldConfiguration, Theme } from '../../http/schemas.ts';
import { AUTO_CLOSE_UNITS } from '../thresholds/cache.ts';
import { environmentView } from '../../accounts/environments/view.ts';
import { deleteEnvironment, updateEnvironment } from './settings.ts';

const MapLayer = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    key: Type.String({ minLength: 1, maxLength: 64, not: Type.Const('nodes') }),
    style: Type.Optional(Type.Unknown()),
    namedStyle: Type.Optional(Type.String({ maxLength: 255 })),
  },
  { additionalProperties: false },
);
const Updatable = Type.Union([FieldConfiguration, Type.Object({ existingKey: Type.Optional(Type.String()), fieldConfiguration: FieldConfiguration })]);
// each kind needs one key: the first field's value is the object's name
const UpdatableList = Type.Array(Updatable, { minItems: 1, maxItems: 50 });

const UpdateBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    mapLayers: Type.Optional(Type.Array(MapLayer, { minItems: 1, maxItems: 30 })),
    fieldConfigurations: Type.Optional(
      Type.Object(
        { pinGroups: UpdatableList, edges: UpdatableList, grids: UpdatableList, nodes: UpdatableList, pins: UpdatableList },
        { additionalProperties: false },
      ),
    ),
    locale: Type.Optional(Type.Union([Type.Literal('en'), Type.Literal('nl')])),
    defaultGraphRange: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    measurementsExpirationDays: Type.Optional(Type.Integer({ minimum: 1, maximum: 9999 })),
    enforceTwoFactorAuthentication: Type.Optional(Type.Boolean()),
    theme: Type.Optional(Type.Union([Theme, Type.Null()])),
    // members only the seed names: accepted and kept
    allowAutoCloseThresholdIssues: Type.Optional(Type.Boolean()),
    issueAutoClosingTriggerAmount: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
    issueAutoClosingTriggerUnitType: Type.Optional(
      Type.Union(
        Object.keys(AUTO_CLOSE_UNITS).map((u) => Type.Literal(u)),
        { description: 'measurements (in-range measurements in a row) or a time in range: seconds, minutes, hours, days' },
      ),
    ),
    measurementsRetentionPolicyRange: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
    logo: Type.Optional(Type.Union([Type.String({ maxLength: 2 * 1024 * 1024, pattern: '^data:' }), Type.Null()])),
    allowAutoCloseConnectivityIssues: Type.Optional(Type.Boolean()),
    defaultLandingPage: Type.Optional(Type.String({ maxLength: 64 })),
    defaultLandingPageHashId: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
  },
  { additionalProperties: false },
);

const rights = { monitoring: 'ENVIRONMENT_ADMIN' };

/** environment update and delete (find and get, which every account may call, live with login in accounts/). */
export async function environmentRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.put('/environment/', { config: { rights }, schema: { tags: ['environment'], summary: 'environment update', body: UpdateBody } }, async (request) => ({
    environment: environmentView(await updateEnvironment(ctx.db, request.account.environment, request.body, ctx.changes)),
  }));
  app.delete('/environment/', { config: { rights }, schema: { tags: ['environment'], summary: 'environment delete' } }, async (request, reply) => {
    await ctx.changes.publish('devices', { hashIds: await deleteEnvironment(ctx.db, request.account.environment) });
    reply.status(204).send();
  });
}
