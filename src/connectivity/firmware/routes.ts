import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { errorHandler } from '../../http/errors.ts';
import { FindQuery, HashId, HashIdParams } from '../../http/schemas.ts';
import { addFirmware, deleteFirmware, findFirmware, getFirmware } from './store.ts';

// the image's size is checked on the decoded bytes (FIRMWARE_MAX_BYTES), not by the schema
const AddBody = Type.Object(
  {
    deviceTypeHashId: HashId,
    version: Type.String({ minLength: 1, maxLength: 100 }),
    data: Type.String(),
  },
  { additionalProperties: false },
);
const FirmwareQuery = Type.Composite([FindQuery, Type.Object({ deviceTypeHashId: Type.Optional(Type.Union([Type.Null(), HashId])) })]);

const rights = { connectivity: 'ENVIRONMENT_ADMIN' };
const tags = ['firmware'];
const env = (request: { account: { environment: { id: number } } }) => request.account.environment.id;

/** Firmware images per device type (not in the seed; paths in API-NOTES.md). Devices download them on the device ports. */
export async function firmwareRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  const maxBytes = ctx.config.firmwareMaxBytes;
  // base64 of the largest image plus room for the other fields: a body a bit over the limit still
  // reaches the handler, which names `data` and the limit
  const bodyLimit = Math.ceil(maxBytes / 3) * 4 + 64 * 1024;
  const addErrors: typeof errorHandler = (err, request, reply) => {
    if (err.statusCode === 413) reply.status(413).send({ key: 'parameter_error', message: `data is larger than the firmware size limit of ${maxBytes} bytes` });
    else errorHandler(err, request, reply);
  };
  app.post(
    '/firmware/',
    { bodyLimit, errorHandler: addErrors, config: { rights }, schema: { tags, summary: 'firmware add', body: AddBody } },
    async (request) => addFirmware(ctx.db, env(request), request.body, maxBytes),
  );
  app.get('/firmware/', { config: { rights }, schema: { tags, summary: 'firmware find', querystring: FirmwareQuery } }, async (request) =>
    findFirmware(ctx.db, env(request), request.query),
  );
  app.get('/firmware/:hashId', { config: { rights }, schema: { tags, summary: 'firmware get', params: HashIdParams } }, async (request) =>
    getFirmware(ctx.db, env(request), request.params.hashId),
  );
  app.delete('/firmware/:hashId', { config: { rights }, schema: { tags, summary: 'firmware delete', params: HashIdParams } }, async (request, reply) => {
    await deleteFirmware(ctx.db, env(request), request.params.hashId);
    reply.status(204).send();
  });
}
