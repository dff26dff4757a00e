import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../app/context.ts';
import { AuthenticationError, NotFoundError } from '../app/errors.ts';
import { signToken } from '../http/auth.ts';
import { HashIdParams } from '../http/schemas.ts';
import { beginLogin } from './login-limits.ts';
import { assertionAccount, prepareLogins, verifyAssertion, type Account, type EnvironmentRecord } from './store.ts';

function environmentView(env: EnvironmentRecord) {
  const s = env.settings as Record<string, unknown>;
  return {
    hashId: env.hashId,
    type: env.type,
    name: env.name,
    mapLayers: s.mapLayers ?? [{ name: 'Default', key: 'default', style: null, namedStyle: 'default' }],
    boundingBox: s.boundingBox ?? null,
    fieldConfigurations: s.fieldConfigurations ?? { pinGroups: [{ key: 'id', name: 'Name', type: 'string' }], edges: [{ key: 'id', name: 'Name', type: 'string' }], grids: [{ key: 'id', name: 'Name', type: 'string' }], nodes: [{ key: 'id', name: 'Name', type: 'string' }], pins: [{ key: 'id', name: 'Name', type: 'string' }] },
    locale: s.locale ?? 'en',
    defaultGraphRange: s.defaultGraphRange ?? '1 month',
    measurementsExpirationDays: s.measurementsExpirationDays ?? 3650,
    enforceTwoFactorAuthentication: false,
    theme: s.theme ?? null,
    expiresAt: null,
    createdAt: env.createdAt.toISOString(),
  };
}

function userView(account: Account) {
  return {
    hashId: account.hashId, email: `${account.hashId}@machine.local`, name: account.name, timezone: 'UTC', locale: 'en',
    phone: null, company: null, rights: account.rights, twoFactorAuthenticationEnabled: false,
  };
}

const userEnvironmentSettings = { notificationLevel: 0, defaultAnalyticsPanelHashId: null };

export async function accountRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  await prepareLogins();
  app.post('/authentication/machine-login', {
    config: { auth: 'none' },
    schema: { tags: ['authentication'], summary: 'machineLogin', security: [], body: Type.Object({ assertion: Type.String({ minLength: 1, maxLength: 1024 }) }) },
  }, async (request) => {
    const { assertion } = request.body as { assertion: string };
    // failed logins are limited per source address and per account (src/accounts/login-limits.ts)
    const attempt = await beginLogin(ctx, request.ip, assertionAccount(assertion));
    const account = await verifyAssertion(ctx.db, assertion);
    if (!account) throw new AuthenticationError('The assertion is not valid');
    await attempt.succeeded();
    return {
      jwt: await signToken(ctx, account),
      user: userView(account),
      environment: environmentView(account.environment),
      environmentRights: account.rights,
      userEnvironmentSettings,
    };
  });

  app.get('/environment/', {
    config: { auth: 'account' },
    schema: { tags: ['environment'], summary: 'environment find' },
  }, async (request) => ({
    nextPageOffset: null,
    rows: [{ environment: environmentView(request.account.environment), environmentRights: request.account.rights }],
  }));

  app.get('/environment/:hashId', {
    config: { auth: 'account' },
    schema: { tags: ['environment'], summary: 'environment get', params: HashIdParams },
  }, async (request) => {
    const { hashId } = request.params as { hashId: string };
    if (hashId !== request.account.environment.hashId) throw new NotFoundError('environment', hashId);
    return { environment: environmentView(request.account.environment), environmentRights: request.account.rights, userEnvironmentSettings };
  });
}
