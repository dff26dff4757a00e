-- Export requests (src/monitoring/exports/): the request as the SDK's model has it, its state and progress, and the
-- CSV file the export worker wrote under DATA_DIR/exports (deleted, with status 'deleted', once it expires).
CREATE TABLE export_request (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  content        jsonb NOT NULL,
  delimiter      text NOT NULL,
  row_delimiter  text NOT NULL,
  -- what to write, resolved when requested (ids, a concrete period): src/monitoring/exports/content.ts
  scope          jsonb NOT NULL,
  status         text NOT NULL DEFAULT 'waiting' CHECK (status IN ('waiting', 'creating', 'available', 'deleted')),
  -- rows written of the rows to write (0 to 1); 1 once available
  progress       double precision NOT NULL DEFAULT 0,
  rows_written   bigint NOT NULL DEFAULT 0,
  file_name      text,
  bytes          bigint,
  expires_at     timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX export_request_env ON export_request (environment_id, created_at, id);
CREATE INDEX export_request_pending ON export_request (status, expires_at) WHERE status <> 'deleted';
