-- Charts (src/monitoring/charts/).
--
-- A chart series over a long range is reduced to time buckets, each answered by its lowest and highest
-- measurement. Reading a year of 5-minute values (105,120 rows) for that costs too much per chart, so
-- every measurement on a pin is also rolled up per (pin, quantity, UTC hour): count, sum, and the value
-- and id of the hour's lowest and highest measurement. Buckets of whole hours are read from here (a
-- year is 8,760 rows); the partial hours at a range's ends come from the measurements themselves.
--
-- The rollup is kept by a statement trigger: the ingest writes a batch of reports in one statement,
-- so the trigger runs once per batch and upserts one row per (pin, quantity, hour) of the batch, in
-- key order (concurrent batches lock shared rows in the same order). Its cost to the ingest is in
-- bench/README.md ("Charts"). Retention prunes it with the measurements (src/monitoring/retention).
-- No foreign keys, as on measurement (002): a deleted pin's rows are never read again (every read
-- starts from a live pin).
CREATE TABLE measurement_hourly (
  pin_id      bigint NOT NULL,
  quantity_id bigint NOT NULL,
  hour        timestamptz NOT NULL,
  count       integer NOT NULL,
  sum         double precision NOT NULL,
  low_value   double precision NOT NULL,
  low_id      bigint NOT NULL,
  high_value  double precision NOT NULL,
  high_id     bigint NOT NULL,
  PRIMARY KEY (pin_id, quantity_id, hour)
);

CREATE FUNCTION measurement_hourly_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO measurement_hourly AS h (pin_id, quantity_id, hour, count, sum, low_value, low_id, high_value, high_id)
  SELECT pin_id, quantity_id, hour, count(*), sum(v), (min(ARRAY[v, id::float8]))[1], (min(ARRAY[v, id::float8]))[2]::bigint,
         (max(ARRAY[v, id::float8]))[1], (max(ARRAY[v, id::float8]))[2]::bigint
    FROM (SELECT n.pin_id, n.quantity_id, date_bin('1 hour', n.generated_at, timestamptz '2000-01-01 00:00:00+00') AS hour,
                 n.significand * power(10::float8, n.order_of_magnitude) AS v, n.id
            FROM new_rows n WHERE n.pin_id IS NOT NULL) x
   GROUP BY pin_id, quantity_id, hour
   ORDER BY pin_id, quantity_id, hour
  ON CONFLICT (pin_id, quantity_id, hour) DO UPDATE SET
    count = h.count + EXCLUDED.count,
    sum = h.sum + EXCLUDED.sum,
    low_value = LEAST(h.low_value, EXCLUDED.low_value),
    low_id = CASE WHEN EXCLUDED.low_value < h.low_value THEN EXCLUDED.low_id ELSE h.low_id END,
    high_value = GREATEST(h.high_value, EXCLUDED.high_value),
    high_id = CASE WHEN EXCLUDED.high_value > h.high_value THEN EXCLUDED.high_id ELSE h.high_id END;
  RETURN NULL;
END
$$;

-- the measurements already stored, once
INSERT INTO measurement_hourly (pin_id, quantity_id, hour, count, sum, low_value, low_id, high_value, high_id)
SELECT pin_id, quantity_id, hour, count(*), sum(v), (min(ARRAY[v, id::float8]))[1], (min(ARRAY[v, id::float8]))[2]::bigint,
       (max(ARRAY[v, id::float8]))[1], (max(ARRAY[v, id::float8]))[2]::bigint
  FROM (SELECT m.pin_id, m.quantity_id, date_bin('1 hour', m.generated_at, timestamptz '2000-01-01 00:00:00+00') AS hour,
               m.significand * power(10::float8, m.order_of_magnitude) AS v, m.id
          FROM measurement m WHERE m.pin_id IS NOT NULL) x
 GROUP BY pin_id, quantity_id, hour;

CREATE TRIGGER measurement_hourly_add AFTER INSERT ON measurement
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION measurement_hourly_add();

-- The chart panel a user saved for one pin group, grid, edge or pin: the mode shown last and the
-- manual charts. Series refer to pins and quantities by id (a renamed pin stays in its charts; a
-- deleted one drops out when read). Without a row a panel is automatic with no manual charts.
CREATE TABLE chart_panel (
  id             bigserial PRIMARY KEY,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  pin_group_id   bigint UNIQUE REFERENCES pin_group(id) ON DELETE CASCADE,
  grid_id        bigint UNIQUE REFERENCES grid(id) ON DELETE CASCADE,
  edge_id        bigint UNIQUE REFERENCES edge(id) ON DELETE CASCADE,
  pin_id         bigint UNIQUE REFERENCES pin(id) ON DELETE CASCADE,
  last_mode      text NOT NULL DEFAULT 'automatic' CHECK (last_mode IN ('manual', 'automatic')),
  -- [{title: string|null, series: [{pinId, quantityId, color: string|null}]}]
  manual_charts  jsonb NOT NULL DEFAULT '[]',
  updated_at     timestamptz NOT NULL DEFAULT now(),
  CHECK (num_nonnulls(pin_group_id, grid_id, edge_id, pin_id) = 1)
);
CREATE INDEX chart_panel_env ON chart_panel (environment_id, id);
