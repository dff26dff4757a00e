-- Charts (src/monitoring/charts/).
--
-- A chart series reads one pin's values of one quantity over a time range, reduced per time bucket
-- to its lowest and highest point. The index on (pin, quantity, time) now carries the value pair and
-- the row id, so that reduction is an index-only scan (a year of 5-minute values is 105,120 entries;
-- the heap is visited only for the <= 2 points per bucket answered). It replaces the narrower index
-- of 001 under the same key, so a report's insert still maintains the same number of indexes; each
-- entry is 14 bytes wider (bench/README.md: "Charts").
CREATE INDEX measurement_pin_quantity_time_values ON measurement (pin_id, quantity_id, generated_at) INCLUDE (significand, order_of_magnitude, id);
DROP INDEX measurement_pin_quantity_time;

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
