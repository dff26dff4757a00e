import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import type { FindQuery } from '../../app/find.ts';
import { Fields, HashId } from '../../http/schemas.ts';
import type { CustomerCommands } from '../../connectivity/commands/routes.ts';
import { addCustomerCommands, withPinGroups } from './commands.ts';
import { claim, customerClaimTokens, findClaimedDevices, getClaimedDevice, link, unclaim, unlink } from './store.ts';

const ClaimBody = Type.Object(
  { claimTokens: Type.Array(Type.String({ minLength: 1, maxLength: 255 }), { minItems: 1, maxItems: 30 }) },
  { additionalProperties: false },
);
const UnclaimBody = Type.Object({ hashIds: Type.Array(HashId, { minItems: 1, maxItems: 30 }) }, { additionalProperties: false });
const FieldsUpdate = Type.Union([
  Fields,
  Type.Array(Type.Object({ key: Type.String({ minLength: 1 }), value: Type.Unknown() }, { additionalProperties: false })),
]);
const LinkBody = Type.Object(
  {
    pinGroupHashId: HashId,
    channelMapping: Type.Array(
      Type.Object(
        {
          channel: Type.Integer({ minimum: 0 }),
          pinHashId: Type.Optional(Type.Union([HashId, Type.Null()])),
          deviceFields: Type.Optional(FieldsUpdate),
        },
        { additionalProperties: false },
      ),
      { maxItems: 60 },
    ),
  },
  { additionalProperties: false },
);

const rights = { monitoring: 'SENSORS' };
const tags = ['device'];

/** The customer's device operations: claim, link, unlink, unclaim. */
export async function linkRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.post('/device/claim', { config: { rights }, schema: { tags, summary: 'device claim', body: ClaimBody } }, async (request) =>
    claim(ctx.db, request.account.environment.id, request.body.claimTokens),
  );
  app.post('/device/unclaim', { config: { rights }, schema: { tags, summary: 'device unclaim', body: UnclaimBody } }, async (request, reply) => {
    const { hashIds } = request.body;
    await unclaim(ctx.db, request.account.environment.id, hashIds);
    await ctx.changes.publish('devices', { hashIds });
    reply.status(204).send();
  });
  app.post(
    '/device/:hashId/link',
    {
      config: { rights },
      schema: { tags, summary: 'device link', params: Type.Object({ hashId: HashId }), body: LinkBody },
    },
    async (request) => {
      const body = request.body;
      const { hashId } = request.params;
      const answer = await link(ctx.db, request.account.environment, hashId, body);
      // the workers' cached copy of the device knows no link: the next report must land on the pins
      await ctx.changes.publish('devices', { hashIds: [hashId] });
      return answer;
    },
  );
  await app.register(async (scope) => {
    // unlink takes no body; the SDK posts it empty, as a form (axios's default type for no data)
    scope.addContentTypeParser('*', { parseAs: 'string' }, (_request, _body, done) => done(null, undefined));
    typed(scope).post(
      '/device/:deviceHashId/unlink',
      {
        config: { rights },
        schema: { tags, summary: 'device unlink', params: Type.Object({ deviceHashId: HashId }) },
      },
      async (request, reply) => {
        const { deviceHashId } = request.params;
        await unlink(ctx.db, request.account.environment.id, deviceHashId);
        await ctx.changes.publish('devices', { hashIds: [deviceHashId] });
        reply.status(204).send();
      },
    );
  });
}

/** device find / get in a monitoring environment (M-READ): wired into the device routes by src/routes.ts. */
export function claimedDeviceReads(ctx: AppContext) {
  return {
    find: (environmentId: number, query: FindQuery) => findClaimedDevices(ctx.db, environmentId, query),
    get: (environmentId: number, hashId: string) => getClaimedDevice(ctx.db, environmentId, hashId),
  };
}

/** command add / find rows in a monitoring environment: wired into the command routes by src/routes.ts. */
export const customerCommands = (ctx: AppContext): CustomerCommands => ({
  add: (events, environmentId, accountId, input) => addCustomerCommands(ctx.db, events, environmentId, accountId, input),
  withPinGroups: (environmentId, rows) => withPinGroups(ctx.db, environmentId, rows),
});

/** getClaimToken in a monitoring environment (M-SENSORS): wired into the claim-token route by src/routes.ts. */
export const claimTokensOfClaimed = (ctx: AppContext) => (environmentId: number, deviceHashIds: string[]) =>
  customerClaimTokens(ctx.db, environmentId, deviceHashIds);
