-- Environments and the machine accounts that reach them.
CREATE TABLE environment (
  id          bigserial PRIMARY KEY,
  hash_id     text NOT NULL UNIQUE,
  type        text NOT NULL CHECK (type IN ('monitoring', 'connectivity')),
  name        text NOT NULL,
  settings    jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  deleted_at  timestamptz
);

CREATE TABLE machine_account (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name           text NOT NULL,
  secret_hash    text NOT NULL,
  rights         text[] NOT NULL,
  revoked_at     timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE quantity (
  id                                bigserial PRIMARY KEY,
  hash_id                           text NOT NULL UNIQUE,
  environment_id                    bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name                              jsonb NOT NULL,
  name_text                         text NOT NULL,
  color                             text NOT NULL,
  unit                              text NOT NULL,
  default_order_of_magnitude        integer NOT NULL,
  default_critically_low_threshold  jsonb,
  default_low_threshold             jsonb,
  default_high_threshold            jsonb,
  default_critically_high_threshold jsonb,
  disable_si_prefixes               boolean NOT NULL DEFAULT false,
  created_at                        timestamptz NOT NULL DEFAULT now(),
  updated_at                        timestamptz NOT NULL DEFAULT now(),
  deleted_at                        timestamptz
);
CREATE INDEX quantity_env ON quantity (environment_id, id);

CREATE TABLE device_type (
  id                                    bigserial PRIMARY KEY,
  hash_id                               text NOT NULL UNIQUE,
  environment_id                        bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name                                  jsonb NOT NULL,
  name_text                             text NOT NULL,
  event_handler                         text NOT NULL,
  event_handler_hash                    text NOT NULL,
  field_configurations                  jsonb NOT NULL DEFAULT '[]',
  pin_group_field_configurations        jsonb NOT NULL DEFAULT '[]',
  channels                              jsonb NOT NULL DEFAULT '[]',
  charts                                jsonb NOT NULL DEFAULT '[]',
  command_type_hash_ids                 jsonb NOT NULL DEFAULT '[]',
  measurement_cycle_command_type_hash_id text,
  identifier_field_key                  text,
  subscription_hash_id                  text NOT NULL UNIQUE,
  created_at                            timestamptz NOT NULL DEFAULT now(),
  updated_at                            timestamptz NOT NULL DEFAULT now(),
  deleted_at                            timestamptz
);
CREATE INDEX device_type_env ON device_type (environment_id, id);

CREATE TABLE report_type (
  id                   bigserial PRIMARY KEY,
  hash_id              text NOT NULL UNIQUE,
  environment_id       bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name                 text NOT NULL,
  field_configurations jsonb NOT NULL,
  parser               text NOT NULL,
  parser_hash          text NOT NULL,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  deleted_at           timestamptz
);
CREATE INDEX report_type_env ON report_type (environment_id, id);

CREATE TABLE device (
  id                         bigserial PRIMARY KEY,
  hash_id                    text NOT NULL UNIQUE,
  environment_id             bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  device_type_id             bigint NOT NULL REFERENCES device_type(id),
  supplier_device_identifier text NOT NULL,
  user_facing_identifier     text,
  fields                     jsonb NOT NULL DEFAULT '{}',
  measurement_cycle          jsonb,
  next_report_before         timestamptz,
  last_online_at             timestamptz,
  validated                  boolean NOT NULL DEFAULT true,
  psk_identity               text UNIQUE,
  psk_sealed                 bytea,
  created_at                 timestamptz NOT NULL DEFAULT now(),
  updated_at                 timestamptz NOT NULL DEFAULT now(),
  UNIQUE (environment_id, supplier_device_identifier)
);
CREATE INDEX device_env ON device (environment_id, id);
CREATE INDEX device_type_idx ON device (device_type_id);

-- What the suppliers' code did: one row per run (trigger), with the activities it caused.
CREATE TABLE supplier_activity (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  device_id      bigint REFERENCES device(id) ON DELETE SET NULL,
  device_type_id bigint REFERENCES device_type(id) ON DELETE SET NULL,
  trigger_type   text NOT NULL,
  trigger_data   jsonb NOT NULL,
  failed         boolean NOT NULL,
  log            jsonb NOT NULL,
  activities     jsonb NOT NULL,
  started_at     timestamptz NOT NULL,
  finished_at    timestamptz NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX supplier_activity_env ON supplier_activity (environment_id, id);
CREATE INDEX supplier_activity_device ON supplier_activity (device_id, id);

-- The monitoring core: condition reports and their measurements.
CREATE TABLE condition_report (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  device_id      bigint REFERENCES device(id) ON DELETE SET NULL,
  report_type_id bigint REFERENCES report_type(id) ON DELETE SET NULL,
  generated_at   timestamptz NOT NULL,
  fields         jsonb NOT NULL DEFAULT '{}',
  payload        text,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX condition_report_device ON condition_report (device_id, generated_at);
CREATE INDEX condition_report_env ON condition_report (environment_id, id);

CREATE TABLE measurement (
  id                        bigserial PRIMARY KEY,
  hash_id                   text NOT NULL UNIQUE,
  report_id                 bigint NOT NULL REFERENCES condition_report(id) ON DELETE CASCADE,
  environment_id            bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  device_id                 bigint REFERENCES device(id) ON DELETE SET NULL,
  quantity_id               bigint NOT NULL REFERENCES quantity(id),
  pin_id                    bigint,
  channel_index             integer NOT NULL,
  channel_measurement_index integer NOT NULL,
  generated_at              timestamptz NOT NULL,
  order_of_magnitude        smallint NOT NULL,
  significand               integer NOT NULL
);
CREATE INDEX measurement_pin_quantity_time ON measurement (pin_id, quantity_id, generated_at);
CREATE INDEX measurement_report ON measurement (report_id);
CREATE INDEX measurement_device_time ON measurement (device_id, generated_at);
