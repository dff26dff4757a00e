import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { crudRoutes } from '../../http/crud.ts';
import { FieldConfigurations, FindQuery, HashId, UpdatableFieldConfigurations, ValuePair } from '../../http/schemas.ts';
import { readRights, staticRights } from '../graph-schemas.ts';
import {
  addReportType,
  deleteReportType,
  findReportTypes,
  getReportType,
  updateReportType,
  type ReportTypeAdd,
  type ReportTypeFindQuery,
  type ReportTypeUpdate,
} from './store.ts';

/** Quantities a manual report type's form offers at most. */
export const MAX_REPORT_TYPE_QUANTITIES = 100;

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Optional(Type.Union([Type.Null(), t]));
// a quantity made with the type (the SDK's defaults: no unit, order of magnitude 0, color #ff00ff), or one of the environment's
const NewQuantity = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    unit: Nullable(Type.String({ minLength: 1, maxLength: 10 })),
    defaultOrderOfMagnitude: Type.Optional(Type.Integer({ minimum: -128, maximum: 127 })),
    defaultCriticallyLowThreshold: Nullable(ValuePair),
    defaultLowThreshold: Nullable(ValuePair),
    defaultHighThreshold: Nullable(ValuePair),
    defaultCriticallyHighThreshold: Nullable(ValuePair),
    disableSiPrefixes: Type.Optional(Type.Boolean()),
    color: Type.Optional(Type.String({ pattern: '^#[0-9a-fA-F]{6}$' })),
  },
  { additionalProperties: false },
);
const Quantities = Type.Array(Type.Union([NewQuantity, Type.Object({ hashId: HashId }, { additionalProperties: false })]), {
  maxItems: MAX_REPORT_TYPE_QUANTITIES,
});
const Name = Type.String({ minLength: 1, maxLength: 255 });

const AddBody = Type.Object(
  {
    name: Name,
    fieldConfigurations: Type.Object(
      { pinGroup: FieldConfigurations, pin: FieldConfigurations, measurement: FieldConfigurations },
      { additionalProperties: false },
    ),
    quantities: Quantities,
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    name: Type.Optional(Name),
    fieldConfigurations: Type.Optional(
      Type.Partial(Type.Object({ pinGroup: UpdatableFieldConfigurations, pin: UpdatableFieldConfigurations, measurement: UpdatableFieldConfigurations }), {
        additionalProperties: false,
      }),
    ),
    quantities: Type.Optional(Quantities),
  },
  { additionalProperties: false },
);
const FindReportTypes = Type.Object({
  ...FindQuery.properties,
  sortBy: Type.Optional(Type.Union([Type.Literal('hashId'), Type.Literal('name')])),
  type: Type.Optional(Type.Union([Type.Literal('human'), Type.Literal('device')])),
});

/** Manual report types of a monitoring environment: the forms of condition reports entered by hand. Changed with STATIC, read with READ. */
export async function environmentReportTypeRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  crudRoutes<Static<typeof AddBody>, Static<typeof UpdateBody>>(app, {
    base: '/report-type/',
    noun: 'report-type',
    addBody: AddBody,
    updateBody: UpdateBody,
    findQuery: FindReportTypes,
    rights: staticRights,
    readRights,
    operations: {
      add: async (env, body) => ({ hashId: await addReportType(ctx.db, env, body as ReportTypeAdd) }),
      find: (env, query) => findReportTypes(ctx.db, env, query as ReportTypeFindQuery),
      get: (env, hashId) => getReportType(ctx.db, env, hashId),
      update: (env, hashId, patch) => updateReportType(ctx.db, env, hashId, patch as ReportTypeUpdate),
      remove: (env, hashId) => deleteReportType(ctx.db, env, hashId),
    },
  });
}
