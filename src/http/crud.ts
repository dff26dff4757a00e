import type { TSchema } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { FindQuery as FindQueryType } from '../app/find.ts';
import type { Account } from '../app/account.ts';
import type { RouteRights } from './rights.ts';
import { FindQuery, HashIdParams } from './schemas.ts';
import { typed } from './typed.ts';

/** The five operations of a resource, each scoped to the caller's environment. */
export interface CrudOperations<TAdd, TPatch> {
  /** returns the add response, e.g. `{ hashId }`; `account` is the caller (device type add subscribes it) */
  add(environmentId: number, body: TAdd, account: Account): Promise<unknown>;
  /** `account`: the caller, for reads a monitoring environment makes differently (its claimed devices' types) */
  find(environmentId: number, query: FindQueryType, account: Account): Promise<unknown>;
  get(environmentId: number, hashId: string, account: Account): Promise<unknown>;
  update(environmentId: number, hashId: string, patch: TPatch): Promise<void>;
  remove(environmentId: number, hashId: string): Promise<void>;
}

export interface CrudOptions<TAdd, TPatch> {
  /** e.g. `/supplier-report-type/`; add and find live here, the rest under `<base><hashId>` */
  base: string;
  /** where find lives when it is not `base` (quantities: `/quantity/quantities`) */
  findPath?: string;
  /** the find query when it has filters beyond the table query's */
  findQuery?: TSchema;
  /** the seed's name of the resource, for the OpenAPI summaries: `device-type` */
  noun: string;
  rights: RouteRights;
  /** rights of find and get when they differ (monitoring READ) */
  readRights?: RouteRights;
  addBody: TSchema;
  updateBody: TSchema;
  operations: CrudOperations<TAdd, TPatch>;
}

/** Registers add / find / get / update / delete with the interface's paths, statuses and schemas. */
export function crudRoutes<TAdd, TPatch>(fastify: FastifyInstance, o: CrudOptions<TAdd, TPatch>): void {
  const app = typed(fastify);
  const tags = [o.noun];
  const read = { rights: o.readRights ?? o.rights };
  const write = { rights: o.rights };
  const env = (request: { account: Account }) => request.account.environment.id;
  app.post(o.base, { config: write, schema: { tags, summary: `${o.noun} add`, body: o.addBody } }, async (request) =>
    // the body has the type of the caller's schema, which this generic code cannot name
    o.operations.add(env(request), request.body as TAdd, request.account),
  );
  app.get(o.findPath ?? o.base, { config: read, schema: { tags, summary: `${o.noun} find`, querystring: o.findQuery ?? FindQuery } }, async (request) =>
    o.operations.find(env(request), request.query as FindQueryType, request.account),
  );
  app.get(`${o.base}:hashId`, { config: read, schema: { tags, summary: `${o.noun} get`, params: HashIdParams } }, async (request) =>
    o.operations.get(env(request), request.params.hashId, request.account),
  );
  app.post(
    `${o.base}:hashId`,
    { config: write, schema: { tags, summary: `${o.noun} update`, params: HashIdParams, body: o.updateBody } },
    async (request, reply) => {
      await o.operations.update(env(request), request.params.hashId, request.body as TPatch);
      reply.status(204).send();
    },
  );
  app.delete(`${o.base}:hashId`, { config: write, schema: { tags, summary: `${o.noun} delete`, params: HashIdParams } }, async (request, reply) => {
    await o.operations.remove(env(request), request.params.hashId);
    reply.status(204).send();
  });
}
