-- Map tiles (src/monitoring/tiles/) select and cluster pin groups by their Web Mercator position: a tile is a
-- rectangle there (a range on mx, my), and a cluster cell is floor(mx · 2^z · 16), with no trigonometry per row
-- at read time. The index holds what a clustered tile reads (id, lon, lat, map_layer), so a zoomed-out tile of
-- 20,000 pin groups is an index-only scan instead of a scan of the environment's rows (measured in docs/speed.md).
-- mx, my: the position as a fraction of the world, 0..1 west to east and north to south (as geometry.ts projects).
ALTER TABLE pin_group
  ADD COLUMN mx float8 GENERATED ALWAYS AS (((geometry -> 'coordinates' ->> 0)::float8 + 180) / 360) STORED,
  ADD COLUMN my float8 GENERATED ALWAYS AS (
    0.5 - ln((1 + sin(radians(least(greatest((geometry -> 'coordinates' ->> 1)::float8, -85.0511287798066), 85.0511287798066))))
           / (1 - sin(radians(least(greatest((geometry -> 'coordinates' ->> 1)::float8, -85.0511287798066), 85.0511287798066))))) / (4 * pi())) STORED;
CREATE INDEX pin_group_mercator ON pin_group (environment_id, mx, my) INCLUDE (id, lon, lat, map_layer) WHERE mx IS NOT NULL;
-- the lon, lat index of 056 is replaced: tiles were its only reader
DROP INDEX pin_group_location;
