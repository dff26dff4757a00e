-- The monitoring environment's asset graph: pin groups (locations) and their pins (ports).
-- Deleting a pin group or pin removes its row; its measurements stay (they carry no foreign key)
-- but no find reaches them any more, since every read joins the live pin.
CREATE TABLE pin_group (
  id                         bigserial PRIMARY KEY,
  hash_id                    text NOT NULL UNIQUE,
  environment_id             bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name                       text NOT NULL,
  symbol_key                 text NOT NULL,
  geometry                   jsonb,
  fields                     jsonb NOT NULL DEFAULT '{}',
  device_fields              jsonb NOT NULL DEFAULT '{}',
  map_layer                  text NOT NULL,
  photo                      text,
  created_at                 timestamptz NOT NULL DEFAULT now(),
  updated_at                 timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pin_group_env ON pin_group (environment_id, id);

CREATE TABLE pin (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  pin_group_id   bigint NOT NULL REFERENCES pin_group(id) ON DELETE CASCADE,
  name           text NOT NULL,
  fields         jsonb NOT NULL DEFAULT '{}',
  device_fields  jsonb NOT NULL DEFAULT '{}',
  type_key       text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pin_env ON pin (environment_id, id);
CREATE INDEX pin_pin_group ON pin (pin_group_id, id);

-- A claimed device linked to a pin group: at most one link per device and per pin group. Each
-- channel of the mapping names the pin its measurements land on.
CREATE TABLE device_link (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  device_id      bigint NOT NULL UNIQUE REFERENCES device(id) ON DELETE CASCADE,
  pin_group_id   bigint NOT NULL UNIQUE REFERENCES pin_group(id) ON DELETE CASCADE,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE device_link_channel (
  link_id bigint NOT NULL REFERENCES device_link(id) ON DELETE CASCADE,
  channel integer NOT NULL,
  pin_id  bigint NOT NULL REFERENCES pin(id) ON DELETE CASCADE,
  PRIMARY KEY (link_id, channel)
);
CREATE INDEX device_link_channel_pin ON device_link_channel (pin_id);

-- A report of a linked device is registered on the pin group it was linked to when it arrived.
-- A pin group's mostRecentMeasurementAt is read from this index (newest entry), not written on the hot path.
ALTER TABLE condition_report ADD COLUMN pin_group_id bigint;
CREATE INDEX condition_report_pin_group_time ON condition_report (pin_group_id, generated_at, id) WHERE pin_group_id IS NOT NULL;

-- Retention prunes by age per environment: rows arrive roughly in time order, so a BRIN index finds
-- the old block ranges for next to nothing on the write path.
CREATE INDEX measurement_generated_brin ON measurement USING brin (generated_at);
CREATE INDEX condition_report_generated_brin ON condition_report USING brin (generated_at);

-- Grids: ordered sets of pins (typeKey pin) or of pin groups (typeKey pinGroup), or the network of nodes (typeKey node).
CREATE TABLE grid (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  type_key       text NOT NULL CHECK (type_key IN ('pin', 'pinGroup', 'node')),
  name           text NOT NULL,
  fields         jsonb NOT NULL DEFAULT '{}',
  photo          text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX grid_env ON grid (environment_id, id);
CREATE TABLE grid_member (
  grid_id      bigint NOT NULL REFERENCES grid(id) ON DELETE CASCADE,
  position     integer NOT NULL,
  pin_group_id bigint REFERENCES pin_group(id) ON DELETE CASCADE,
  pin_id       bigint REFERENCES pin(id) ON DELETE CASCADE,
  CHECK ((pin_group_id IS NULL) <> (pin_id IS NULL)),
  UNIQUE (grid_id, pin_group_id),
  UNIQUE (grid_id, pin_id)
);
CREATE INDEX grid_member_order ON grid_member (grid_id, position);
CREATE INDEX grid_member_pin_group ON grid_member (pin_group_id) WHERE pin_group_id IS NOT NULL;
CREATE INDEX grid_member_pin ON grid_member (pin_id) WHERE pin_id IS NOT NULL;

-- Edges (lines): a LineString or MultiLineString; pins may lie on one.
CREATE TABLE edge (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name           text NOT NULL,
  fields         jsonb NOT NULL DEFAULT '{}',
  geometry       jsonb NOT NULL,
  map_layer      text NOT NULL,
  photo          text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX edge_env ON edge (environment_id, id);
ALTER TABLE pin ADD COLUMN edge_id bigint REFERENCES edge(id) ON DELETE SET NULL;
CREATE INDEX pin_edge ON pin (edge_id) WHERE edge_id IS NOT NULL;

-- Nodes: points that join single-segment edges; each belongs to a grid of typeKey node (its network).
CREATE TABLE node (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  grid_id        bigint NOT NULL REFERENCES grid(id) ON DELETE CASCADE,
  name           text NOT NULL,
  fields         jsonb NOT NULL DEFAULT '{}',
  geometry       jsonb NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX node_env ON node (environment_id, id);
ALTER TABLE edge
  ADD COLUMN node1_id bigint REFERENCES node(id) ON DELETE SET NULL,
  ADD COLUMN node2_id bigint REFERENCES node(id) ON DELETE SET NULL;
