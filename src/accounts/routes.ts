import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../http/typed.ts';
import type { AppContext } from '../app/context.ts';
import { AuthenticationError, NotFoundError } from '../app/errors.ts';
import { signToken } from './authenticate.ts';
import { FindQuery, HashIdParams } from '../http/schemas.ts';
import { environmentView } from './environments/view.ts';
import { beginLogin } from './login-limits.ts';
import { lacksEnforcedSecondFactor, TwoFactorRequiredError } from './two-factor/enforce.ts';
import { checkSecondFactor, splitCode } from './two-factor/routes.ts';
import { userEnvironmentSettings } from './user-environment-settings.ts';
import { userView as userViewOf } from './users.ts';
import { assertionAccount, prepareLogins, verifyAssertion, type Account, type EnvironmentRecord } from './store.ts';

const userView = (account: Account) => userViewOf(account, account.environment);

/** The SDK's supplier (a connectivity environment as its supplier routes show it). */
export function supplierView(env: EnvironmentRecord) {
  return {
    hashId: env.hashId,
    name: env.name,
    enforceTwoFactorAuthentication: (env.settings.enforceTwoFactorAuthentication as boolean | undefined) ?? false,
    theme: env.settings.theme ?? null,
    createdAt: env.createdAt.toISOString(),
  };
}

export async function accountRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  await prepareLogins();
  app.post(
    '/authentication/machine-login',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['authentication'],
        summary: 'machineLogin',
        security: [],
        body: Type.Object({ assertion: Type.String({ minLength: 1, maxLength: 1024 }) }),
        description:
          'assertion: <hashId>:<secret>, followed by :<code> once the account has two-factor authentication. In an environment that enforces ' +
          'two-factor authentication an account without it gets 403 right_error, with a token in details.jwt that reaches only get-keyuri and enable.',
      },
    },
    async (request) => {
      // with two-factor authentication on, the code follows the assertion: <hashId>:<secret>:<code>
      const { credential: assertion, code } = splitCode(request.body.assertion);
      // failed logins are limited per source address and per account (src/accounts/login-limits.ts)
      const attempt = await beginLogin(ctx, request.ip, assertionAccount(assertion));
      const account = await verifyAssertion(ctx.db, assertion);
      if (!account) throw new AuthenticationError('The assertion is not valid');
      await checkSecondFactor(ctx, account, code);
      await attempt.succeeded();
      // the secret was right, so the caller may learn why it cannot go on, and gets a token to set a second factor up with
      if (lacksEnforcedSecondFactor(account)) throw new TwoFactorRequiredError({ jwt: await signToken(ctx, account) });
      return {
        jwt: await signToken(ctx, account),
        user: userView(account),
        environment: environmentView(account.environment),
        environmentRights: account.rights,
        userEnvironmentSettings: await userEnvironmentSettings(ctx.db, account),
      };
    },
  );

  app.get(
    '/environment/',
    {
      config: { auth: 'account' },
      schema: { tags: ['environment'], summary: 'environment find' },
    },
    async (request) => ({
      nextPageOffset: null,
      rows: [
        {
          environment: environmentView(request.account.environment),
          environmentRights: request.account.rights,
          userEnvironmentSettings: await userEnvironmentSettings(ctx.db, request.account),
        },
      ],
    }),
  );

  app.get(
    '/environment/:hashId',
    {
      config: { auth: 'account' },
      schema: { tags: ['environment'], summary: 'environment get', params: HashIdParams },
    },
    async (request) => {
      const { hashId } = request.params;
      if (hashId !== request.account.environment.hashId) throw new NotFoundError('environment', hashId);
      return {
        environment: environmentView(request.account.environment),
        environmentRights: request.account.rights,
        userEnvironmentSettings: await userEnvironmentSettings(ctx.db, request.account),
      };
    },
  );

  // the SDK's settings get: the account as its user and, for a monitoring account, its environment and own settings
  app.get(
    '/settings/',
    {
      config: { auth: 'account' },
      schema: {
        tags: ['settings'],
        summary: 'settings get',
        description: 'user; for a monitoring account also environment, environmentRights and userEnvironmentSettings.',
      },
    },
    async (request) => {
      const account = request.account;
      if (account.environment.type !== 'monitoring') return { user: userView(account) };
      return {
        environment: environmentView(account.environment),
        environmentRights: account.rights,
        userEnvironmentSettings: await userEnvironmentSettings(ctx.db, account),
        user: userView(account),
      };
    },
  );

  // the SDK's supplier find / get: the connectivity environment of the account (none for a monitoring account)
  const suppliers = (account: Account) => (account.environment.type === 'connectivity' ? [account.environment] : []);
  app.get(
    '/supplier/',
    {
      config: { auth: 'account' },
      schema: { tags: ['supplier'], summary: 'supplier (connectivity environment) find', querystring: FindQuery },
    },
    async (request) => ({
      nextPageOffset: null,
      rows: suppliers(request.account).map((env) => ({ supplier: supplierView(env), supplierRights: request.account.rights })),
    }),
  );
  app.get(
    '/supplier/:hashId',
    {
      config: { auth: 'account' },
      schema: { tags: ['supplier'], summary: 'supplier (connectivity environment) get', params: HashIdParams },
    },
    async (request) => {
      const { hashId } = request.params;
      const env = suppliers(request.account).find((e) => e.hashId === hashId);
      if (!env) throw new NotFoundError('supplier', hashId);
      return { supplier: supplierView(env), supplierRights: request.account.rights };
    },
  );
}
