-- Commands: a command type's instruction for one device, from add until the device's handler
-- marks it sent or drops it. Soft-deleted (deleted_at) so a device that holds it can still be told.
CREATE TABLE command (
  id                bigserial PRIMARY KEY,
  hash_id           text NOT NULL UNIQUE,
  environment_id    bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  device_id         bigint NOT NULL REFERENCES device(id) ON DELETE CASCADE,
  command_type_id   bigint NOT NULL REFERENCES command_type(id),
  -- the location the command was given for; locations live on the monitoring side (not yet)
  pin_group_hash_id text,
  created_by        bigint REFERENCES machine_account(id) ON DELETE SET NULL,
  fields            jsonb NOT NULL DEFAULT '{}',
  start_at          timestamptz,
  delay             double precision NOT NULL DEFAULT 0,
  end_at            timestamptz,
  channel_indices   jsonb NOT NULL DEFAULT '[]',
  email             jsonb NOT NULL DEFAULT '[]',
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  sent_at           timestamptz,
  dropped_at        timestamptz,
  deleted_at        timestamptz
);
CREATE INDEX command_env ON command (environment_id, id);
-- every device contact reads the device's pending commands: keep only those in the index
CREATE INDEX command_scheduled ON command (device_id, id) WHERE sent_at IS NULL AND dropped_at IS NULL AND deleted_at IS NULL;
