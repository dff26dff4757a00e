import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { FindQuery, HashId, HashIdParams, Timestamp } from '../../http/schemas.ts';
import { readRights } from '../graph-schemas.ts';
import {
  addIssue,
  commentOnIssue,
  deleteComment,
  deleteIssue,
  findIssues,
  getIssue,
  setGridNotification,
  setSubscription,
  updateComment,
  updateIssue,
} from './store.ts';

const issueRights = { monitoring: 'ISSUES' };
const Level = Type.Union([Type.Literal(0), Type.Literal(1), Type.Literal(2)]);
const TypeKey = Type.Union(['missing', 'incorrect', 'unexpected', 'unrelated'].map((k) => Type.Literal(k)));
const Links = Type.Array(Type.Object({ pinGroupHashId: HashId, pinHashId: Type.Union([HashId, Type.Null()]) }, { additionalProperties: false }), {
  minItems: 1,
  maxItems: 20,
});
const QuantityHashIds = Type.Array(HashId, { maxItems: 10 });
const Automation = Type.Union([
  Type.Object({ type: Type.Literal('missing') }, { additionalProperties: false }),
  Type.Object({ type: Type.Literal('thresholds'), quantityHashIds: Type.Array(HashId, { minItems: 1, maxItems: 10 }) }, { additionalProperties: false }),
  Type.Null(),
]);
// the SDK sets no bound on pinHashIds; a pin group with more pins than this is not expected
const PinHashIds = Type.Array(HashId, { maxItems: 200 });
const Title = Type.String({ minLength: 1, maxLength: 100 });
const Comment = Type.String({ maxLength: 65536 });

const AddBody = Type.Object(
  {
    links: Type.Optional(Links),
    assignedUserHashId: Type.Optional(Type.Union([HashId, Type.Null()])),
    pinGroupHashId: Type.Optional(HashId),
    pinHashIds: Type.Optional(PinHashIds),
    automation: Type.Optional(Automation),
    title: Title,
    level: Level,
    typeKey: Type.Optional(TypeKey),
    comment: Comment,
    quantityHashIds: Type.Optional(QuantityHashIds),
    labelHashIds: Type.Optional(Type.Array(HashId, { maxItems: 10 })),
    startAt: Type.Optional(Timestamp),
    endAt: Type.Optional(Type.Union([Timestamp, Type.Null()])),
  },
  { additionalProperties: false },
);

const UpdateBody = Type.Object(
  {
    links: Type.Optional(Links),
    title: Type.Optional(Title),
    pinGroupHashId: Type.Optional(HashId),
    pinHashIds: Type.Optional(PinHashIds),
    automation: Type.Optional(Automation),
    assignedUserHashId: Type.Optional(Type.Union([HashId, Type.Null()])),
    pinHashId: Type.Optional(Type.Union([HashId, Type.Null()])),
    quantityHashIds: Type.Optional(QuantityHashIds),
    labelHashIds: Type.Optional(Type.Array(HashId, { maxItems: 10 })),
    closed: Type.Optional(Type.Boolean()),
    level: Type.Optional(Level),
    typeKey: Type.Optional(TypeKey),
    startAt: Type.Optional(Timestamp),
    endAt: Type.Optional(Type.Union([Timestamp, Type.Null()])),
  },
  { additionalProperties: false },
);

// the SDK sends a null filter as an empty value
const OptionalHashId = Type.Optional(Type.Union([HashId, Type.Literal(''), Type.Null()]));
const IssueFind = Type.Object({
  ...FindQuery.properties,
  pinGroupHashId: OptionalHashId,
  edgeHashId: OptionalHashId,
  gridHashId: OptionalHashId,
  labelHashId: OptionalHashId,
  mapLayers: Type.Optional(Type.Union([Type.Array(Type.String({ maxLength: 64 }), { maxItems: 30 }), Type.Null()])),
  // not in the SDK (its find lists open and closed alike): the console asks for the open ones only
  closed: Type.Optional(Type.Union([Type.Boolean(), Type.Literal(''), Type.Null()])),
});

const tags = ['issue'];

/** Issues on pin groups and their comments: opened by users (issue add) or by the thresholds and the connectivity check. */
export async function issueRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get(
    '/issue/',
    {
      config: { rights: readRights },
      schema: {
        tags,
        summary: 'issue find',
        querystring: IssueFind,
        description:
          'Issues open and closed (not deleted). sortBy createdAt (default) or level; filters pinGroupHashId, edgeHashId (a pin of the pin group lies on it), gridHashId, labelHashId (issues tagged with that label), mapLayers. ' +
          'Not in the SDK: `closed` (false: only open issues, true: only closed ones; absent or empty: both, as the SDK expects), a filter like the others, so pages (rowsPerPage, nextPageOffset) hold only issues that match it.',
      },
    },
    async (request) => findIssues(ctx.db, request.account, request.query),
  );
  app.get(
    '/issue/:hashId',
    {
      config: { rights: readRights },
      schema: {
        tags,
        summary: 'issue get',
        params: HashIdParams,
        description: "Besides the SDK's members, `trigger` tells what opened an automatic issue and what it saw last (null for a manual issue).",
      },
    },
    async (request) => getIssue(ctx.db, request.account, request.params.hashId),
  );
  app.post(
    '/issue/',
    {
      config: { rights: issueRights },
      schema: {
        tags,
        summary: 'issue add',
        body: AddBody,
        description:
          'pinGroupHashId (or the deprecated links, all on one pin group) is required; pinHashIds empty means every pin. A non-empty comment becomes the first comment; the author is subscribed.',
      },
    },
    async (request) => addIssue(ctx.db, request.account, request.body),
  );
  app.post(
    '/issue/:hashId',
    {
      config: { rights: issueRights },
      schema: {
        tags,
        summary: 'issue update',
        params: HashIdParams,
        body: UpdateBody,
        description:
          '`closed` closes or reopens; an automatic issue reopens only while no other issue of the same cause is open (else 409). Answers 204: no system comment is made.',
      },
    },
    async (request, reply) => {
      await updateIssue(ctx.db, request.account, request.params.hashId, request.body, ctx.changes);
      reply.status(204).send();
    },
  );
  app.delete('/issue/:hashId', { config: { rights: issueRights }, schema: { tags, summary: 'issue delete', params: HashIdParams } }, async (request, reply) => {
    await deleteIssue(ctx.db, request.account.environment.id, request.params.hashId, ctx.changes);
    reply.status(204).send();
  });
  app.post(
    '/issue/:hashId/comment',
    {
      config: { rights: issueRights },
      schema: {
        tags,
        summary: 'issue addComment',
        params: HashIdParams,
        body: Type.Object({ comment: Comment, closeIssue: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
      },
    },
    async (request) => commentOnIssue(ctx.db, request.account, request.params.hashId, request.body, ctx.changes),
  );
  app.post(
    '/issue/:hashId/notifications',
    {
      config: { rights: readRights },
      schema: {
        tags,
        summary: 'issue setSubscription',
        params: HashIdParams,
        body: Type.Object({ subscribed: Type.Boolean() }, { additionalProperties: false }),
      },
    },
    async (request, reply) => {
      await setSubscription(ctx.db, request.account, request.params.hashId, request.body.subscribed);
      reply.status(204).send();
    },
  );
  app.post(
    '/graph/grid/:hashId/notification',
    {
      config: { rights: readRights },
      schema: {
        tags: ['graph'],
        summary: 'graph setNotification',
        params: HashIdParams,
        body: Type.Object({ level: Type.Union([Level, Type.Null()]) }, { additionalProperties: false }),
        description:
          "The account's subscription to new issues on the pin groups of this grid: 0 every issue, 1 from serious, 2 critical only, null none. pin-group-grid get answers it as notificationLevel. It decides, for issues on the pin groups of this grid, over the account's own notificationLevel: the account is subscribed to an issue when it opens or rises to this level, and mailed (src/notifications/issue-notifier.ts).",
      },
    },
    async (request, reply) => {
      await setGridNotification(ctx.db, request.account, request.params.hashId, request.body.level);
      reply.status(204).send();
    },
  );
  app.post(
    '/issue-comment/:hashId',
    {
      config: { rights: issueRights },
      schema: {
        tags: ['issue-comment'],
        summary: 'issue-comment update',
        params: HashIdParams,
        body: Type.Object({ comment: Comment }, { additionalProperties: false }),
        description: 'Only its author may change a comment (else 403).',
      },
    },
    async (request) => updateComment(ctx.db, request.account, request.params.hashId, request.body.comment),
  );
  app.delete(
    '/issue-comment/:hashId',
    {
      config: { rights: issueRights },
      schema: {
        tags: ['issue-comment'],
        summary: 'issue-comment delete',
        params: HashIdParams,
        description: 'Only its author may delete a comment (else 403).',
      },
    },
    async (request, reply) => {
      await deleteComment(ctx.db, request.account, request.params.hashId);
      reply.status(204).send();
    },
  );
}
