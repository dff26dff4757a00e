import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { FindQuery, HashId, HashIdParams } from '../../http/schemas.ts';
import type { FieldsUpdate } from './fields.ts';
import { addDeviceWithPsk, deleteDevices, findDevices, getDevice, updateDevice } from './store.ts';

const AddWithPskBody = Type.Object(
  {
    supplierDeviceIdentifier: Type.String({ minLength: 1, maxLength: 255 }),
    deviceTypeHashId: HashId,
    // the key in hex as openssl -psk and gnutls --pskkey take it: 1..256 bytes
    psk: Type.String({ minLength: 2, maxLength: 512, pattern: '^([0-9a-fA-F]{2})+$' }),
    pskIdentity: Type.String({ minLength: 1, maxLength: 255 }),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    fields: Type.Union([
      Type.Record(Type.String(), Type.Unknown()),
      Type.Array(Type.Object({ key: Type.String({ minLength: 1 }), value: Type.Unknown() }, { additionalProperties: false })),
    ]),
  },
  { additionalProperties: false },
);
const DeleteBody = Type.Object({ hashIds: Type.Array(HashId, { minItems: 1, maxItems: 30 }) }, { additionalProperties: false });

// the SDK's filter: devices whose type can receive commands of this type
const DeviceQuery = Type.Composite([FindQuery, Type.Object({ forCommandTypeHashId: Type.Optional(HashId) })]);

const rights = { connectivity: 'ENVIRONMENT_ADMIN' };
const tags = ['device'];

/** How a monitoring environment reads the devices it claimed (src/monitoring/links/, wired in src/routes.ts). */
export interface ClaimedDeviceReads {
  find(environmentId: number, query: Static<typeof FindQuery>): Promise<unknown>;
  get(environmentId: number, hashId: string): Promise<unknown>;
}

export async function deviceRoutes(fastify: FastifyInstance, ctx: AppContext, claimed?: ClaimedDeviceReads): Promise<void> {
  const app = typed(fastify);
  const readRights = claimed ? { ...rights, monitoring: 'READ' } : rights;
  const monitoring = (request: { account: { environment: { type: string } } }) => claimed !== undefined && request.account.environment.type === 'monitoring';
  app.post('/device/psk', { config: { rights }, schema: { tags, summary: 'device addWithPsk', body: AddWithPskBody } }, async (request) => ({
    hashId: await addDeviceWithPsk(ctx, request.account.environment.id, request.body),
  }));
  // registered before /device/:hashId so the static path wins
  app.post('/device/delete', { config: { rights }, schema: { tags, summary: 'device delete (multi)', body: DeleteBody } }, async (request, reply) => {
    await deleteDevices(ctx, request.account.environment.id, request.body.hashIds);
    reply.status(204).send();
  });
  app.get('/device/', { config: { rights: readRights }, schema: { tags, summary: 'device find', querystring: DeviceQuery } }, async (request) =>
    (monitoring(request) ? claimed!.find : (env: number, q: Static<typeof DeviceQuery>) => findDevices(ctx.db, env, q))(
      request.account.environment.id,
      request.query,
    ),
  );
  app.get('/device/:hashId', { config: { rights: readRights }, schema: { tags, summary: 'device get', params: HashIdParams } }, async (request) =>
    (monitoring(request) ? claimed!.get : (env: number, h: string) => getDevice(ctx.db, env, h))(request.account.environment.id, request.params.hashId),
  );
  app.post('/device/:hashId', { config: { rights }, schema: { tags, summary: 'device update', params: HashIdParams, body: UpdateBody } }, async (request) =>
    updateDevice(ctx.db, request.account.environment.id, request.params.hashId, request.body.fields as FieldsUpdate),
  );
}
