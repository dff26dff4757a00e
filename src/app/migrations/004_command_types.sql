-- Command types (templates of commands to devices) and device connectivity counter keys,
-- both owned by a connectivity environment and soft-deleted.
CREATE TABLE command_type (
  id                   bigserial PRIMARY KEY,
  hash_id              text NOT NULL UNIQUE,
  environment_id       bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name                 jsonb NOT NULL,
  name_text            text NOT NULL,
  start                text NOT NULL CHECK (start IN ('required', 'optional', 'disabled')),
  "end"                text NOT NULL CHECK ("end" IN ('required', 'optional', 'disabled')),
  channel_select       text NOT NULL CHECK (channel_select IN ('single', 'multiple', 'off')),
  environment_access   text NOT NULL CHECK (environment_access IN ('full', 'read', 'none')),
  field_configurations jsonb NOT NULL DEFAULT '[]',
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  deleted_at           timestamptz
);
CREATE INDEX command_type_env ON command_type (environment_id, id);

CREATE TABLE connectivity_counter_key (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name           text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  deleted_at     timestamptz
);
CREATE INDEX connectivity_counter_key_env ON connectivity_counter_key (environment_id, id);
