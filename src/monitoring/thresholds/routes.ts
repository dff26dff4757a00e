import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { ParameterError } from '../../app/errors.ts';
import { FindQuery, HashId, ValuePair } from '../../http/schemas.ts';
import { findThresholds, setThresholds } from './store.ts';

const thresholdRights = { monitoring: 'THRESHOLDS' };
const Limit = Type.Union([ValuePair, Type.Null()]);
const Item = Type.Object(
  {
    pinHashId: HashId,
    quantityHashId: HashId,
    thresholds: Type.Union([
      Type.Object({ criticallyLow: Limit, low: Limit, high: Limit, criticallyHigh: Limit }, { additionalProperties: false }),
      Type.Null(),
    ]),
  },
  { additionalProperties: false },
);
// the SDK sets no bound on the array; one request sets at most this many
const MAX_ITEMS = 500;
// the array's length is checked in the handler: a union's own error would name the object form
const SetBody = Type.Union([Item, Type.Array(Item)]);
const ThresholdFind = Type.Object({
  ...FindQuery.properties,
  type: Type.Optional(Type.Union([Type.Literal('quantity'), Type.Literal('port')])),
});

const tags = ['measurement-threshold'];
const SET_DESCRIPTION =
  `Sets the limits of a quantity on a pin (one item or an array of 1 to ${MAX_ITEMS}; all or nothing); thresholds null removes them, and the quantity's default thresholds apply again. ` +
  'A measurement below low or above high opens a level 1 (serious) issue on the pin group, below criticallyLow or above criticallyHigh a level 2 (critical) one; a value on a limit is inside it. ' +
  "The limits must not decrease from criticallyLow to criticallyHigh. The quantity is the environment's own or one of a supplier whose device it claimed.";

/** Pin thresholds ("issue triggers"): measurement-threshold set and find, and SDK 17's graph setThreshold. */
export async function thresholdRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  const set = async (request: FastifyRequest) => {
    const body = request.body;
    const many = Array.isArray(body);
    if (many && (body.length < 1 || body.length > MAX_ITEMS)) throw new ParameterError(`body must be an array of 1 to ${MAX_ITEMS} items, got ${body.length}`);
    const hashIds = await setThresholds(ctx.db, request.account.environment.id, many ? body : [body], (i) => (many ? `[${i}].` : ''), ctx.changes);
    return { hashId: many ? hashIds : hashIds[0] };
  };
  app.post(
    '/measurement-threshold/thresholds',
    {
      config: { rights: thresholdRights },
      schema: { tags, summary: 'measurement-threshold set', body: SetBody, description: SET_DESCRIPTION },
    },
    set,
  );
  // SDK 17's graph setThreshold: the same operation, under 18.3.1's right (17 asked ISSUES for it)
  app.post(
    '/graph/thresholds',
    {
      config: { rights: thresholdRights },
      schema: { tags: ['graph'], summary: 'graph setThreshold', body: SetBody, description: `measurement-threshold set at SDK 17's path. ${SET_DESCRIPTION}` },
    },
    set,
  );
  app.get(
    '/measurement-threshold/',
    {
      config: { rights: thresholdRights },
      schema: {
        tags,
        summary: 'measurement-threshold find',
        querystring: ThresholdFind,
        description:
          "Pins' own thresholds (type port) and the environment's quantity default thresholds (type quantity, location null). sortBy quantityName (default) or pinGroupName.",
      },
    },
    async (request) => findThresholds(ctx.db, request.account.environment.id, request.query),
  );
}
