import { createReadStream } from 'node:fs';
import path from 'node:path';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { NotFoundError } from '../../app/errors.ts';
import { FindQuery, HashId, Timestamp } from '../../http/schemas.ts';
import { typed } from '../../http/typed.ts';
import { AnalyticsQuery } from '../analytics/schemas.ts';
import { downloadPath, linkHolds } from './link.ts';
import { exportDir, queueNextExports } from './queue.ts';
import { resolveContent, type AddExportContent } from './scope.ts';
import { addExportRequest, downloadableFile, findExportRequests } from './store.ts';

const tags = ['settings'];
const rights = { monitoring: 'EXPORT' };
const Content = Type.Union([
  Type.Object({ type: Type.Literal('measurementFilter'), measurementFilterHashId: HashId }, { additionalProperties: false }),
  Type.Object(
    { type: Type.Literal('all'), staticOnly: Type.Boolean(), gridHashId: Type.Union([HashId, Type.Null()]), from: Timestamp, to: Timestamp },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      type: Type.Literal('analyticsQuery'),
      query: AnalyticsQuery,
      dashboardId: Type.String({ minLength: 1, maxLength: 64 }),
      widgetName: Type.String({ minLength: 1, maxLength: 255 }),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      type: Type.Literal('chart'),
      from: Timestamp,
      to: Timestamp,
      series: Type.Array(Type.Object({ pinHashId: HashId, quantityHashId: HashId }, { additionalProperties: false }), { maxItems: 40 }),
      highResolution: Type.Optional(Type.Boolean()),
      title: Type.String({ maxLength: 255 }),
    },
    { additionalProperties: false },
  ),
]);
const AddBody = Type.Object(
  {
    content: Content,
    delimiter: Type.Union([Type.Literal(','), Type.Literal(';')]),
    rowDelimiter: Type.Union([Type.Literal('\n'), Type.Literal('\r\n')]),
  },
  { additionalProperties: false },
);
const ExportFind = Type.Object({ ...FindQuery.properties, sortBy: Type.Optional(Type.Literal('createdAt')) });
const DownloadQuery = Type.Object({ environment: HashId, expires: Type.String({ pattern: '^[0-9]{1,12}$' }), signature: Type.String({ maxLength: 64 }) });

/** settings add-export and find-export-request (EXPORT), and the download of a written export by its signed link. */
export async function exportRoutes(untyped: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(untyped);
  const env = (request: FastifyRequest) => request.account.environment;
  const linkOf = (request: FastifyRequest) => (hashId: string, expiresAt: Date) =>
    `${request.protocol}://${request.host}${downloadPath(ctx.keys.exportDownload, {
      hashId,
      environmentHashId: env(request).hashId,
      expires: Math.floor(expiresAt.getTime() / 1000),
    })}`;

  app.post(
    '/settings/export',
    {
      config: { rights },
      schema: {
        tags,
        summary: 'settings add-export',
        body: AddBody,
        description: 'Queues a CSV export; find-export-request shows its status, progress and, once available, its download link.',
      },
    },
    async (request) => {
      const body = request.body;
      // an analytics query's columns are checked by the analytics module, not by this schema (unknown[] here)
      const resolved = await resolveContent(ctx.db, env(request).id, body.content as AddExportContent);
      const hashId = await addExportRequest(ctx.db, env(request).id, resolved, body);
      // queued when its environment's turn comes (now, unless its earlier exports fill its turns); one that does not
      // reach Redis stays waiting, queued by its environment's next add or finished export, or when a worker starts
      await queueNextExports(ctx, env(request).id).catch((err: Error) =>
        ctx.log.warn({ exportRequest: hashId, err: err.message }, 'export could not be queued yet'),
      );
      return { hashId };
    },
  );

  app.get(
    '/settings/export',
    {
      config: { rights },
      schema: { tags, summary: 'settings find-export-request', querystring: ExportFind },
    },
    async (request) => findExportRequests(ctx.db, env(request).id, request.query, linkOf(request)),
  );

  app.get(
    '/file/:hashId',
    {
      config: { auth: 'none', apiVersion: false },
      schema: {
        tags,
        summary: 'export download (the downloadUrl of an available export request)',
        params: Type.Object({ hashId: HashId }),
        querystring: DownloadQuery,
      },
    },
    async (request, reply) => {
      const { hashId } = request.params;
      const q = request.query;
      const link = { hashId, environmentHashId: q.environment, expires: Number(q.expires) };
      // a forged, altered or expired link learns nothing: the same answer as an export that does not exist
      const file = linkHolds(ctx.keys.exportDownload, link, q.signature, Date.now() / 1000) ? await downloadableFile(ctx.db, hashId, q.environment) : null;
      if (!file) throw new NotFoundError('file', hashId);
      return reply
        .header('content-type', 'text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="export-${hashId}.csv"`)
        .header('content-length', file.bytes)
        .send(createReadStream(path.join(exportDir(ctx), file.fileName)));
    },
  );
}
