-- Labels tag issues; a deleted label is kept (soft delete) but leaves every issue it tagged.
CREATE TABLE label (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name           text NOT NULL,
  color          text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  deleted_at     timestamptz
);
CREATE INDEX label_env ON label (environment_id, id);

-- position keeps the order an issue add or update named its labels in
CREATE TABLE issue_label (
  issue_id bigint NOT NULL REFERENCES issue(id) ON DELETE CASCADE,
  label_id bigint NOT NULL REFERENCES label(id) ON DELETE CASCADE,
  position integer NOT NULL,
  PRIMARY KEY (issue_id, label_id)
);
CREATE INDEX issue_label_label ON issue_label (label_id);

-- A saved search through measurements. Its pin groups, quantities and report types are id lists:
-- one deleted later simply drops out of the filter's answer.
CREATE TABLE measurement_filter (
  id                           bigserial PRIMARY KEY,
  hash_id                      text NOT NULL UNIQUE,
  environment_id               bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name                         text NOT NULL,
  description                  text NOT NULL,
  -- 'lastMonth' | 'lastQuarter' | 'lastYear' or {since?, before?}
  period                       jsonb NOT NULL,
  include_pins_without_reports boolean NOT NULL,
  report_type_ids              bigint[] NOT NULL DEFAULT '{}',
  grid_id                      bigint REFERENCES grid(id) ON DELETE SET NULL,
  pin_group_ids                bigint[] NOT NULL DEFAULT '{}',
  quantity_ids                 bigint[] NOT NULL DEFAULT '{}',
  field_keys                   text[] NOT NULL DEFAULT '{}',
  pin_field_keys               text[] NOT NULL DEFAULT '{}',
  edge_field_keys              text[] NOT NULL DEFAULT '{}',
  created_at                   timestamptz NOT NULL DEFAULT now(),
  updated_at                   timestamptz NOT NULL DEFAULT now(),
  deleted_at                   timestamptz
);
CREATE INDEX measurement_filter_env ON measurement_filter (environment_id, id);
