import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { LOCALES } from '../users.ts';
import { addFeedback, updateOwnSettings } from './store.ts';

const UpdateBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    password: Type.Optional(Type.String({ minLength: 8, maxLength: 1024 })),
    locale: Type.Optional(Type.Union(LOCALES.map((l) => Type.Literal(l)))),
    timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    phone: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 64 }), Type.Null()])),
    company: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 255 }), Type.Null()])),
  },
  { additionalProperties: false },
);
const FeedbackBody = Type.Object(
  {
    theme: Type.Optional(Type.Union([Type.String({ maxLength: 255 }), Type.Null()])),
    feedback: Type.String({ minLength: 1, maxLength: 1000 }),
  },
  { additionalProperties: false },
);

const tags = ['settings'];

/** settings update and feedback: any logged-in account, of either environment type, about itself. */
export async function settingsRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.post(
    '/settings/',
    {
      config: { auth: 'account' },
      schema: {
        tags,
        summary: 'settings update',
        body: UpdateBody,
        description:
          "The caller's own name, locale, timezone, phone and company, as settings get and user show them. password: 400 (machine accounts log in with their assertion; a person sets a new password through password reset).",
      },
    },
    async (request, reply) => {
      await updateOwnSettings(ctx.db, request.account, request.body);
      reply.status(204).send();
    },
  );
  app.post(
    '/settings/feedback',
    {
      config: { auth: 'account' },
      schema: {
        tags,
        summary: 'settings feedback',
        body: FeedbackBody,
        description: 'Stored for the operator, and mailed to FEEDBACK_MAIL_TO when that is set.',
      },
    },
    async (request, reply) => {
      await addFeedback(ctx, request.account, request.body);
      reply.status(204).send();
    },
  );
}
