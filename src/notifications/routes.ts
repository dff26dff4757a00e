import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../http/typed.ts';
import type { AppContext } from '../app/context.ts';
import { FindQuery } from '../http/schemas.ts';
import { findNotifications } from '../mail/store.ts';

const NotificationQuery = Type.Composite([
  FindQuery,
  Type.Object({
    state: Type.Optional(Type.Union([Type.Literal('queued'), Type.Literal('sent'), Type.Literal('failed')])),
  }),
]);

// recipients' addresses and what they were told: for those who administer the environment
const rights = { monitoring: 'ENVIRONMENT_ADMIN', connectivity: 'ENVIRONMENT_ADMIN' };

/** Not an SDK route: what became of the environment's mails (issue notifications, supplier alerts, command mails). */
export async function notificationRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get(
    '/notification',
    {
      config: { rights },
      schema: {
        tags: ['notification'],
        summary: 'notification find',
        querystring: NotificationQuery,
        description:
          'The mails this environment caused (not an SDK route), newest first: kind (issue, issueDigest, supplierAlert, command), ' +
          "userHashId (the account it was written for, null for a command's own addresses), to, subject, body, and state: " +
          '`queued` (waiting for the SMTP server; `reason` says why when a try failed, it is tried again with backoff), ' +
          '`sent` (the server took it; `reason` lists recipients it refused while it took the others) or `failed` ' +
          '(refused for good with a 5xx reply, kept in `reason`, or SMTP_URL is not configured). `state` filters.',
      },
    },
    async (request) => findNotifications(ctx.db, request.account.environment.id, request.query),
  );
}
