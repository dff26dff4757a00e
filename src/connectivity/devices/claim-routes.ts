import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { HashId } from '../../http/schemas.ts';
import { createClaimTokens, type ClaimToken } from './claim.ts';

const GetClaimTokenBody = Type.Object({ deviceHashIds: Type.Array(HashId, { minItems: 1, maxItems: 30 }) }, { additionalProperties: false });

/** A monitoring environment's getClaimToken (src/monitoring/links/, wired in src/routes.ts). */
export type CustomerClaimTokens = (environmentId: number, deviceHashIds: string[]) => Promise<ClaimToken[]>;

/** getClaimToken: a supplier's (C-ADMIN), and a customer's for the devices it claimed (M-SENSORS) when `customer` is given. */
export async function claimRoutes(fastify: FastifyInstance, ctx: AppContext, customer?: CustomerClaimTokens): Promise<void> {
  const app = typed(fastify);
  app.post(
    '/device/claim-tokens',
    {
      config: { rights: customer ? { connectivity: 'ENVIRONMENT_ADMIN', monitoring: 'SENSORS' } : { connectivity: 'ENVIRONMENT_ADMIN' } },
      schema: {
        tags: ['device'],
        summary: 'device getClaimToken',
        description:
          'A new claim token for each device (older tokens of these devices stop working). Refused (409) for a device already claimed by a monitoring environment, or, asked by that environment, for a device linked to a pin group.',
        body: GetClaimTokenBody,
      },
    },
    async (request) => {
      const { environment } = request.account;
      const deviceHashIds = request.body.deviceHashIds;
      return {
        claimTokens:
          environment.type === 'monitoring' && customer
            ? await customer(environment.id, deviceHashIds)
            : await createClaimTokens(ctx.db, environment.id, deviceHashIds),
      };
    },
  );
}
