-- Firmware images per device type. The image lives in PostgreSQL; it is stored uncompressed
-- (STORAGE EXTERNAL: images are mostly compressed already) so a byte range is read with
-- substring() without detoasting the whole value. Delete is a hard delete: the bytes go.
CREATE TABLE firmware (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  device_type_id bigint NOT NULL REFERENCES device_type(id) ON DELETE CASCADE,
  version        text NOT NULL,
  size           integer NOT NULL,
  sha256         text NOT NULL,
  data           bytea NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT firmware_version_unique UNIQUE (device_type_id, version)
);
ALTER TABLE firmware ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE INDEX firmware_env ON firmware (environment_id, id);
