import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { HashId } from '../../http/schemas.ts';
import { createClaimTokens } from './claim.ts';

const GetClaimTokenBody = Type.Object({ deviceHashIds: Type.Array(HashId, { minItems: 1, maxItems: 30 }) }, { additionalProperties: false });

/** getClaimToken, supplier side. The monitoring side (claim, unclaim, tokens for its own devices) arrives with a later issue. */
export async function claimRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  app.post('/device/claim-tokens', {
    config: { rights: { connectivity: 'ENVIRONMENT_ADMIN' } },
    schema: {
      tags: ['device'], summary: 'device getClaimToken',
      description: 'A new claim token for each device (older tokens of these devices stop working). Refused (409) for a device already claimed by a monitoring environment.',
      body: GetClaimTokenBody,
    },
  }, async (request) => ({
    claimTokens: await createClaimTokens(ctx.db, request.account.environment.id, (request.body as Static<typeof GetClaimTokenBody>).deviceHashIds),
  }));
}
