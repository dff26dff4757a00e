-- Manual report types and reports (report-type, report routes of a monitoring environment).
--
-- A manual report type ('human') is a report_type row of the monitoring environment, beside the suppliers'
-- device report types ('device'): condition reports name either kind the same way, so measurement find,
-- charts, analytics, thresholds and issues read manual reports exactly as device reports. It has no parser.
ALTER TABLE report_type ADD COLUMN type text NOT NULL DEFAULT 'device' CHECK (type IN ('human', 'device'));
ALTER TABLE report_type ALTER COLUMN parser DROP NOT NULL, ALTER COLUMN parser_hash DROP NOT NULL;

-- The quantities a manual report type offers its form, in order; a quantity taken out of the type leaves.
CREATE TABLE report_type_quantity (
  report_type_id bigint NOT NULL REFERENCES report_type(id) ON DELETE CASCADE,
  quantity_id    bigint NOT NULL REFERENCES quantity(id),
  position       integer NOT NULL,
  PRIMARY KEY (report_type_id, quantity_id)
);
CREATE INDEX report_type_quantity_quantity ON report_type_quantity (quantity_id);

-- A manual measurement has no device channel.
ALTER TABLE measurement ALTER COLUMN channel_index DROP NOT NULL, ALTER COLUMN channel_measurement_index DROP NOT NULL;

-- What a manual report has beyond a condition report: who entered it and which of its measurements are not
-- compared to thresholds. Keyed by the report's hashId, without a foreign key, so that condition_report can be
-- partitioned; the report's delete removes this row in the same transaction.
CREATE TABLE manual_report (
  report_hash_id     text PRIMARY KEY,
  environment_id     bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  account_id         bigint,
  user_name          text,
  unchecked_measurement_hash_ids text[] NOT NULL DEFAULT '{}',
  updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX manual_report_env ON manual_report (environment_id);
