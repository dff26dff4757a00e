-- import-request: a CSV of measurements a person uploads for the environment's pin groups. Imported in
-- one transaction or not at all: an invalid file keeps its row (state invalid, errors naming lines and
-- fields) and changes nothing else. Reports it made name it, so a reader can tell imported from entered.
CREATE TABLE import_request (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  account_id     bigint REFERENCES machine_account(id) ON DELETE SET NULL,
  user_name      text NOT NULL,
  name           text NOT NULL,
  state          text NOT NULL CHECK (state IN ('processing', 'invalid', 'errored', 'success', 'waiting', 'deleted')),
  errors         jsonb,
  bytes          integer NOT NULL,
  reports        integer NOT NULL DEFAULT 0,
  processed_at   timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  deleted_at     timestamptz
);
CREATE INDEX import_request_env ON import_request (environment_id, id);
