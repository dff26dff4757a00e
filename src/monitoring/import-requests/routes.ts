import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { FindQuery, HashId, HashIdParams } from '../../http/schemas.ts';
import { addImportRequest, deleteImportRequest, findImportRequests, generateTemplate, MAX_BYTES } from './store.ts';

const TemplateBody = Type.Object(
  {
    pinGroupHashIds: Type.Array(HashId, { maxItems: 200 }),
    pinGroupGridHashIds: Type.Array(HashId, { maxItems: 10 }),
    reportTypeHashIds: Type.Array(HashId, { minItems: 1, maxItems: 5 }),
  },
  { additionalProperties: false },
);
const AddBody = Type.Object(
  {
    // base64 of MAX_BYTES, and the media type before it
    dataUrl: Type.String({ minLength: 1, maxLength: Math.ceil(MAX_BYTES / 3) * 4 + 256 }),
    name: Type.String({ minLength: 1, maxLength: 255 }),
  },
  { additionalProperties: false },
);
const Find = Type.Object({
  ...FindQuery.properties,
  sortBy: Type.Optional(Type.Union(['hashId', 'name', 'state', 'updatedAt', 'createdAt'].map((k) => Type.Literal(k)))),
});

const tags = ['import-request'];
const rights = { monitoring: 'IMPORT' };

/** Measurements imported from a CSV sheet (see store.ts for its columns): template, add, find, delete. */
export async function importRequestRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.post(
    '/import/template',
    {
      config: { rights },
      schema: {
        tags,
        summary: 'import-request generate-template',
        body: TemplateBody,
        description: "A CSV with a line per pin of the pin groups (and of the grids' pin groups) and per report type, answered inline (url is a data URL).",
      },
    },
    async (request) => generateTemplate(ctx.db, request.account, request.body),
  );

  app.post(
    '/import/',
    {
      // the file is in the body: past the schema's limit the body itself is refused, before it is parsed
      bodyLimit: Math.ceil(MAX_BYTES / 3) * 4 + 64 * 1024,
      config: { rights },
      schema: {
        tags,
        summary: 'import-request add',
        body: AddBody,
        description: `A CSV (data URL, at most ${MAX_BYTES} bytes, 10,000 lines) of the template's columns. Every line is checked; when one fails the request is stored as invalid with the failing lines (line, column, reason) and nothing is imported, else all of it is, in one transaction.`,
      },
    },
    async (request) => addImportRequest(ctx.db, request.account, request.body),
  );

  app.get(
    '/import/',
    {
      // not IMPORT: the SDK's import-request find names USERS (and ENVIRONMENT_ADMIN for a supplier), and the seed's
      // interface names no right for it; an SDK client with USERS alone must be able to list
      config: { rights: { monitoring: 'USERS', connectivity: 'ENVIRONMENT_ADMIN' } },
      schema: { tags, summary: 'import-request find', querystring: Find },
    },
    async (request) => findImportRequests(ctx.db, request.account.environment.id, request.query),
  );

  app.delete(
    '/import/:hashId',
    {
      config: { rights },
      schema: { tags, summary: 'import-request delete', params: HashIdParams, description: 'The request leaves the list; the reports it imported stay.' },
    },
    async (request, reply) => {
      await deleteImportRequest(ctx.db, request.account.environment.id, request.params.hashId);
      reply.status(204).send();
    },
  );
}
