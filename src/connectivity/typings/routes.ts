import type { FastifyInstance } from 'fastify';
import { TYPINGS, type TypingsKind } from '../../sandbox/typings.ts';

/** Each resource whose code the sandbox runs, and the kind of code it holds. */
const PATHS: [string, TypingsKind, string][] = [
  ['/device-type/typings.d.ts', 'eventHandler', "a device type's eventHandler"],
  ['/supplier-report-type/typings.d.ts', 'parser', "a report type's parser"],
  ['/supplier-webhook/typings.d.ts', 'webhookIdentifier', "a supplier webhook's identifier"],
  ['/supplier-certificate/typings.d.ts', 'certificateIdentifier', "a supplier certificate's identifier"],
];

/**
 * The declarations supplier code is written against, for editors. Public and without Api-Version: they
 * hold nothing of any environment, and an editor or a plain download fetches them without headers.
 */
export async function typingsRoutes(app: FastifyInstance): Promise<void> {
  for (const [path, kind, what] of PATHS) {
    app.get(
      path,
      {
        config: { auth: 'none', apiVersion: false },
        schema: {
          tags: ['typings'],
          summary: `typings of ${what}`,
          security: [],
          description:
            `TypeScript declarations (Arguments, Exec, Result, WebRequest, ...) of what ${what} receives and returns in the sandbox. ` +
            'Save it beside the code so an editor completes and checks it; the code itself does not declare them. No Api-Version or token needed.',
          response: { 200: { description: 'a .d.ts file', content: { 'application/typescript': { schema: { type: 'string' } } } } },
        },
      },
      async (_request, reply) => {
        reply.header('content-type', 'application/typescript; charset=utf-8').header('cache-control', 'public, max-age=3600');
        return TYPINGS[kind];
      },
    );
  }
}
