-- Analytics panels (dashboards) of a monitoring environment: a title, a layout and cards, each
-- card an analytics query with its visualisation. Layout and cards are kept as given (jsonb).
CREATE TABLE analytics_panel (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  title          text NOT NULL,
  layout         jsonb NOT NULL DEFAULT '[]',
  cards          jsonb NOT NULL DEFAULT '[]',
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX analytics_panel_env ON analytics_panel (environment_id, id);

-- An account's own settings in its environment (the SDK's userEnvironmentSettings). No row: the
-- defaults (notificationLevel 0, no default panel). Deleting the default panel clears it here.
CREATE TABLE user_environment_settings (
  account_id                 bigint NOT NULL REFERENCES machine_account(id) ON DELETE CASCADE,
  environment_id             bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  notification_level         smallint DEFAULT 0 CHECK (notification_level IN (0, 1, 2)),
  default_analytics_panel_id bigint REFERENCES analytics_panel(id) ON DELETE SET NULL,
  PRIMARY KEY (account_id, environment_id)
);
CREATE INDEX user_environment_settings_panel ON user_environment_settings (default_analytics_panel_id) WHERE default_analytics_panel_id IS NOT NULL;
