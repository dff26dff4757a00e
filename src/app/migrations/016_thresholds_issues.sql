-- Thresholds and issues: what a monitoring environment watches on its pins and what it found.

-- A pin's issue trigger for one quantity (the SDK's MeasurementThreshold). A null limit is not checked.
-- The quantity may be the environment's own or a supplier's whose device the environment claimed.
CREATE TABLE pin_threshold (
  id              bigserial PRIMARY KEY,
  hash_id         text NOT NULL UNIQUE,
  environment_id  bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  pin_id          bigint NOT NULL REFERENCES pin(id) ON DELETE CASCADE,
  quantity_id     bigint NOT NULL REFERENCES quantity(id) ON DELETE CASCADE,
  critically_low  jsonb,
  low             jsonb,
  high            jsonb,
  critically_high jsonb,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (pin_id, quantity_id)
);
CREATE INDEX pin_threshold_env ON pin_threshold (environment_id, id);

-- Connectivity thresholds: per environment, priority level (1 serious, 2 critical) and device type
-- (null: every device type without its own threshold of that level).
CREATE TABLE connectivity_threshold (
  id                  bigserial PRIMARY KEY,
  environment_id      bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  device_type_id      bigint REFERENCES device_type(id) ON DELETE CASCADE,
  priority_level      smallint NOT NULL CHECK (priority_level IN (1, 2)),
  missed_reports      integer NOT NULL,
  offline_for_seconds integer NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX connectivity_threshold_key ON connectivity_threshold (environment_id, priority_level, coalesce(device_type_id, 0));

-- Issues on a pin group (pin_ids empty: every pin). `cause` names what opened an automatic issue
-- ('threshold:<pinId>:<quantityId>', 'missing:<deviceId>'); one open issue per cause.
CREATE TABLE issue (
  id                   bigserial PRIMARY KEY,
  hash_id              text NOT NULL UNIQUE,
  environment_id       bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  pin_group_id         bigint NOT NULL REFERENCES pin_group(id) ON DELETE CASCADE,
  pin_ids              bigint[] NOT NULL DEFAULT '{}',
  account_id           bigint REFERENCES machine_account(id) ON DELETE SET NULL,
  assigned_account_id  bigint REFERENCES machine_account(id) ON DELETE SET NULL,
  title                text NOT NULL,
  level                smallint NOT NULL CHECK (level IN (0, 1, 2)),
  type_key             text,
  automation           jsonb,
  quantity_ids         bigint[] NOT NULL DEFAULT '{}',
  cause                text,
  -- the trigger's state while the issue lasts (automatic issues)
  last_value           jsonb,
  last_level           smallint,
  last_measured_at     timestamptz,
  crossing_count       integer NOT NULL DEFAULT 0,
  measurement_count    integer NOT NULL DEFAULT 0,
  in_range_count       integer NOT NULL DEFAULT 0,
  in_range_since       timestamptz,
  start_at             timestamptz NOT NULL DEFAULT now(),
  closed_at            timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  deleted_at           timestamptz
) WITH (fillfactor = 25);
-- fillfactor: an open threshold issue is updated by every batch that measures its pin; room on its
-- page lets those updates stay HOT (no index entries, pruned in place) even when one statement
-- updates every row of a page
CREATE INDEX issue_env ON issue (environment_id, id);
CREATE INDEX issue_open_pin_group ON issue (pin_group_id, level) WHERE closed_at IS NULL AND deleted_at IS NULL;
CREATE UNIQUE INDEX issue_open_cause ON issue (cause) WHERE cause IS NOT NULL AND closed_at IS NULL AND deleted_at IS NULL;

CREATE TABLE issue_comment (
  id         bigserial PRIMARY KEY,
  hash_id    text NOT NULL UNIQUE,
  issue_id   bigint NOT NULL REFERENCES issue(id) ON DELETE CASCADE,
  account_id bigint REFERENCES machine_account(id) ON DELETE SET NULL,
  comment    text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz
);
CREATE INDEX issue_comment_issue ON issue_comment (issue_id, id);

-- An account's subscription to new issues on the pin groups of a grid (graph set-notification):
-- level 0 every issue, 1 from serious, 2 critical only; null none. No row: the account's default.
CREATE TABLE grid_notification (
  grid_id    bigint NOT NULL REFERENCES grid(id) ON DELETE CASCADE,
  account_id bigint NOT NULL REFERENCES machine_account(id) ON DELETE CASCADE,
  level      smallint CHECK (level IN (0, 1, 2)),
  PRIMARY KEY (grid_id, account_id)
);

CREATE TABLE issue_subscription (
  issue_id   bigint NOT NULL REFERENCES issue(id) ON DELETE CASCADE,
  account_id bigint NOT NULL REFERENCES machine_account(id) ON DELETE CASCADE,
  PRIMARY KEY (issue_id, account_id)
);
