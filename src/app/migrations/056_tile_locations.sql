-- Map tiles (src/monitoring/tiles/) find the pin groups and edges of a tile's area by position:
-- a pin group's [lon, lat] as columns with a B-tree per environment (a range on lon, lat checked
-- in the index), an edge's bounding box [west, south, east, north] as one column.
ALTER TABLE pin_group
  ADD COLUMN lon float8 GENERATED ALWAYS AS ((geometry -> 'coordinates' ->> 0)::float8) STORED,
  ADD COLUMN lat float8 GENERATED ALWAYS AS ((geometry -> 'coordinates' ->> 1)::float8) STORED;
CREATE INDEX pin_group_location ON pin_group (environment_id, lon, lat) WHERE lon IS NOT NULL;

-- [west, south, east, north] of a LineString or MultiLineString
CREATE FUNCTION line_bbox(g jsonb) RETURNS float8[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT ARRAY[min((p ->> 0)::float8), min((p ->> 1)::float8), max((p ->> 0)::float8), max((p ->> 1)::float8)]
    FROM jsonb_path_query(g, CASE WHEN g ->> 'type' = 'MultiLineString' THEN '$.coordinates[*][*]' ELSE '$.coordinates[*]' END::jsonpath) p
$$;
ALTER TABLE edge ADD COLUMN bbox float8[] GENERATED ALWAYS AS (line_bbox(geometry)) STORED;
