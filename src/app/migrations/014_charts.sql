-- Charts (src/monitoring/charts/).
--
-- A chart series over a long range is reduced to time buckets, each answered by its lowest and highest
-- measurement. Reading a year of 5-minute values (105,120 rows) for that costs too much per chart, so
-- every measurement on a pin is also rolled up per (pin, quantity, UTC hour): count, sum, and the hour's
-- lowest and highest measurement (value, id, and the point as the API answers it, so a reduced series
-- reads nothing else). Buckets of whole hours are read from here (a year is 8,760 rows); the partial
-- hours at a range's ends come from the measurements themselves.
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
  low         jsonb NOT NULL,
  high_value  double precision NOT NULL,
  high_id     bigint NOT NULL,
  high        jsonb NOT NULL,
  PRIMARY KEY (pin_id, quantity_id, hour)
);

-- The points are stored as chart series answer them (pinHashId and performance are added by the reader).
CREATE FUNCTION measurement_hourly_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO measurement_hourly AS h (pin_id, quantity_id, hour, count, sum, low_value, low_id, low, high_value, high_id, high)
  SELECT a.pin_id, a.quantity_id, a.hour, a.count, a.sum,
         a.lo[1], lo.id, jsonb_build_object('hashId', lo.hash_id, 'generatedAt', lo.generated_at, 'channelIndex', lo.channel_index,
             'channelMeasurementIndex', lo.channel_measurement_index, 'reportHashId', lor.hash_id, 'orderOfMagnitude', lo.order_of_magnitude, 'significand', lo.significand),
         a.hi[1], hi.id, jsonb_build_object('hashId', hi.hash_id, 'generatedAt', hi.generated_at, 'channelIndex', hi.channel_index,
             'channelMeasurementIndex', hi.channel_measurement_index, 'reportHashId', hir.hash_id, 'orderOfMagnitude', hi.order_of_magnitude, 'significand', hi.significand)
    FROM (SELECT pin_id, quantity_id, hour, count(*) AS count, sum(v) AS sum, min(ARRAY[v, id::float8]) AS lo, max(ARRAY[v, id::float8]) AS hi
            FROM (SELECT n.pin_id, n.quantity_id, date_bin('1 hour', n.generated_at, timestamptz '2000-01-01 00:00:00+00') AS hour,
                         n.significand * power(10::float8, n.order_of_magnitude) AS v, n.id
                    FROM new_rows n WHERE n.pin_id IS NOT NULL) x
           GROUP BY pin_id, quantity_id, hour) a
    JOIN new_rows lo ON lo.id = a.lo[2]::bigint LEFT JOIN condition_report lor ON lor.id = lo.report_id
    JOIN new_rows hi ON hi.id = a.hi[2]::bigint LEFT JOIN condition_report hir ON hir.id = hi.report_id
   ORDER BY a.pin_id, a.quantity_id, a.hour
  ON CONFLICT (pin_id, quantity_id, hour) DO UPDATE SET
    count = h.count + EXCLUDED.count,
    sum = h.sum + EXCLUDED.sum,
    low_value = LEAST(h.low_value, EXCLUDED.low_value),
    low_id = CASE WHEN EXCLUDED.low_value < h.low_value THEN EXCLUDED.low_id ELSE h.low_id END,
    low = CASE WHEN EXCLUDED.low_value < h.low_value THEN EXCLUDED.low ELSE h.low END,
    high_value = GREATEST(h.high_value, EXCLUDED.high_value),
    high_id = CASE WHEN EXCLUDED.high_value > h.high_value THEN EXCLUDED.high_id ELSE h.high_id END,
    high = CASE WHEN EXCLUDED.high_value > h.high_value THEN EXCLUDED.high ELSE h.high END;
  RETURN NULL;
END
$$;

CREATE TRIGGER measurement_hourly_add AFTER INSERT ON measurement
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION measurement_hourly_add();

-- the measurements already stored, once: the trigger's statement over the whole table
INSERT INTO measurement_hourly AS h (pin_id, quantity_id, hour, count, sum, low_value, low_id, low, high_value, high_id, high)
SELECT a.pin_id, a.quantity_id, a.hour, a.count, a.sum,
       a.lo[1], lo.id, jsonb_build_object('hashId', lo.hash_id, 'generatedAt', lo.generated_at, 'channelIndex', lo.channel_index,
           'channelMeasurementIndex', lo.channel_measurement_index, 'reportHashId', lor.hash_id, 'orderOfMagnitude', lo.order_of_magnitude, 'significand', lo.significand),
       a.hi[1], hi.id, jsonb_build_object('hashId', hi.hash_id, 'generatedAt', hi.generated_at, 'channelIndex', hi.channel_index,
           'channelMeasurementIndex', hi.channel_measurement_index, 'reportHashId', hir.hash_id, 'orderOfMagnitude', hi.order_of_magnitude, 'significand', hi.significand)
  FROM (SELECT pin_id, quantity_id, hour, count(*) AS count, sum(v) AS sum, min(ARRAY[v, id::float8]) AS lo, max(ARRAY[v, id::float8]) AS hi
          FROM (SELECT n.pin_id, n.quantity_id, date_bin('1 hour', n.generated_at, timestamptz '2000-01-01 00:00:00+00') AS hour,
                       n.significand * power(10::float8, n.order_of_magnitude) AS v, n.id
                  FROM measurement n WHERE n.pin_id IS NOT NULL) x
         GROUP BY pin_id, quantity_id, hour) a
  JOIN measurement lo ON lo.id = a.lo[2]::bigint LEFT JOIN condition_report lor ON lor.id = lo.report_id
  JOIN measurement hi ON hi.id = a.hi[2]::bigint LEFT JOIN condition_report hir ON hir.id = hi.report_id;

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
