import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../http/typed.ts';
import type { AppContext } from '../app/context.ts';
import type { Queryable } from '../app/db.ts';
import { ParameterError } from '../app/errors.ts';
import { HashId } from '../http/schemas.ts';

/** The SDK's userEnvironmentSettings: an account's own settings in its environment. */
export interface UserEnvironmentSettings {
  notificationLevel: 0 | 1 | 2 | null;
  defaultAnalyticsPanelHashId: string | null;
}

/** The user whose settings are meant: the calling account, or another user of its environment (user routes). */
export interface SettingsOwner {
  id: number;
  environment: { id: number };
}

/** What an account that never set anything has. */
export const DEFAULTS: UserEnvironmentSettings = { notificationLevel: 0, defaultAnalyticsPanelHashId: null };

export async function userEnvironmentSettings(db: Queryable, account: SettingsOwner): Promise<UserEnvironmentSettings> {
  const { rows } = await db.query<{ notification_level: 0 | 1 | 2 | null; panel: string | null }>(
    `SELECT s.notification_level, a.hash_id AS panel FROM user_environment_settings s
       LEFT JOIN analytics_panel a ON a.id = s.default_analytics_panel_id
      WHERE s.account_id = $1 AND s.environment_id = $2`,
    [account.id, account.environment.id],
  );
  if (rows.length === 0) return { ...DEFAULTS };
  return { notificationLevel: rows[0].notification_level, defaultAnalyticsPanelHashId: rows[0].panel };
}

export interface SettingsUpdate {
  notificationLevel?: 0 | 1 | 2 | null;
  defaultAnalyticsPanelHashId?: string | null;
}

/** Sets the members given; the default panel must be a panel of the account's environment. */
export async function updateUserEnvironmentSettings(db: Queryable, account: SettingsOwner, update: SettingsUpdate): Promise<void> {
  let panelId: number | null = null;
  if (typeof update.defaultAnalyticsPanelHashId === 'string') {
    const { rows } = await db.query<{ id: number }>('SELECT id FROM analytics_panel WHERE environment_id = $1 AND hash_id = $2', [
      account.environment.id,
      update.defaultAnalyticsPanelHashId,
    ]);
    if (rows.length === 0)
      throw new ParameterError(`defaultAnalyticsPanelHashId: no analytics panel ${update.defaultAnalyticsPanelHashId} in this environment`);
    panelId = rows[0].id;
  }
  const setsLevel = update.notificationLevel !== undefined;
  const setsPanel = update.defaultAnalyticsPanelHashId !== undefined;
  await db.query(
    `INSERT INTO user_environment_settings (account_id, environment_id, notification_level, default_analytics_panel_id)
     VALUES ($1, $2, CASE WHEN $3 THEN $4::smallint ELSE 0 END, $6)
     ON CONFLICT (account_id, environment_id) DO UPDATE SET
       notification_level = CASE WHEN $3 THEN $4::smallint ELSE user_environment_settings.notification_level END,
       default_analytics_panel_id = CASE WHEN $5 THEN $6::bigint ELSE user_environment_settings.default_analytics_panel_id END`,
    [account.id, account.environment.id, setsLevel, update.notificationLevel ?? null, setsPanel, panelId],
  );
}

export const SettingsUpdateBody = Type.Object(
  {
    notificationLevel: Type.Optional(Type.Union([Type.Literal(0), Type.Literal(1), Type.Literal(2), Type.Null()])),
    defaultAnalyticsPanelHashId: Type.Optional(Type.Union([HashId, Type.Null()])),
  },
  { additionalProperties: false },
);

/** The SDK's settings updateUserEnvironmentSettings (right READ, as the SDK's route states). */
export async function userEnvironmentSettingsRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.post(
    '/settings/user-environment-settings',
    {
      config: { rights: { monitoring: 'READ' } },
      schema: {
        tags: ['settings'],
        summary: 'user environment settings update',
        body: SettingsUpdateBody,
        description:
          "Sets the calling account's own settings in its environment; members left out keep their value. " +
          'defaultAnalyticsPanelHashId must name an analytics panel of the environment (null clears it; deleting the panel clears it too). ' +
          'Login, environment find and environment get answer these settings as userEnvironmentSettings. ' +
          "notificationLevel subscribes the account to every issue that opens or rises to that level (0 every issue, 1 from serious, 2 critical only, null none) unless a grid of the issue's pin group has its own for the account; subscribers are mailed (src/notifications/issue-notifier.ts).",
      },
    },
    async (request, reply) => {
      await updateUserEnvironmentSettings(ctx.db, request.account, request.body);
      reply.status(204).send();
    },
  );
}
