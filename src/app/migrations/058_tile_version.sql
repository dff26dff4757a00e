-- Rendered map tiles are cached per environment under the environment's tile version (src/monitoring/tiles/cache.ts).
-- The version changes in the same transaction as every write a tile shows: a pin group's or edge's or node's place,
-- name, symbol or map layer, a device link (deviceLinkHashId), a pin joining or leaving an edge, and an open issue's
-- level (the level of its pin group and of the edges of its pins). A reader takes the version before it reads the
-- graph, so a tile rendered then is at least as new as its version, and no tile is stale once a write has
-- committed. The version lives here, not in a node's memory, so every node of a fleet sees it change.
-- The hot path's writes that a tile does not show (an open threshold issue's counters, device fields, updated_at)
-- leave it alone: the row triggers' WHEN clauses compare only what a tile shows.
-- No foreign key: a deleted environment's cascade bumps its version while the environment row goes.
CREATE TABLE tile_version (
  environment_id bigint PRIMARY KEY,
  -- random, not a counter: a database restored from a backup never hands out a version a cache holds already
  version        uuid NOT NULL,
  -- the transaction that set it: later writes of the same transaction leave the row alone
  bumped_by      xid8 NOT NULL
);

-- gridgate.audit emptied: the version is bookkeeping, not a change the audit trail shows (045_audit_log.sql)
CREATE FUNCTION tile_version_bump(env bigint) RETURNS void LANGUAGE sql SET gridgate.audit = '' AS $$
  INSERT INTO tile_version (environment_id, version, bumped_by) VALUES (env, gen_random_uuid(), pg_current_xact_id())
  ON CONFLICT (environment_id) DO UPDATE SET version = excluded.version, bumped_by = excluded.bumped_by
   WHERE tile_version.bumped_by <> excluded.bumped_by
$$;

CREATE FUNCTION tile_version_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM tile_version_bump(CASE WHEN TG_OP = 'DELETE' THEN OLD.environment_id ELSE NEW.environment_id END);
  RETURN NULL;
END $$;

-- inserts and deletes of many rows at once (an import, a cascade): one bump per environment, not per row
CREATE FUNCTION tile_version_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM tile_version_bump(e) FROM (SELECT DISTINCT environment_id AS e FROM changed) s;
  RETURN NULL;
END $$;

CREATE TRIGGER tile_version_insert AFTER INSERT ON pin_group REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION tile_version_rows();
CREATE TRIGGER tile_version_delete AFTER DELETE ON pin_group REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION tile_version_rows();
CREATE TRIGGER tile_version_update AFTER UPDATE ON pin_group FOR EACH ROW
  WHEN ((OLD.hash_id, OLD.name, OLD.symbol_key, OLD.map_layer, OLD.geometry) IS DISTINCT FROM (NEW.hash_id, NEW.name, NEW.symbol_key, NEW.map_layer, NEW.geometry))
  EXECUTE FUNCTION tile_version_row();

CREATE TRIGGER tile_version_insert AFTER INSERT ON edge REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION tile_version_rows();
CREATE TRIGGER tile_version_delete AFTER DELETE ON edge REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION tile_version_rows();
CREATE TRIGGER tile_version_update AFTER UPDATE ON edge FOR EACH ROW
  WHEN ((OLD.hash_id, OLD.name, OLD.map_layer, OLD.geometry) IS DISTINCT FROM (NEW.hash_id, NEW.name, NEW.map_layer, NEW.geometry))
  EXECUTE FUNCTION tile_version_row();

CREATE TRIGGER tile_version_insert AFTER INSERT ON node REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION tile_version_rows();
CREATE TRIGGER tile_version_delete AFTER DELETE ON node REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION tile_version_rows();
CREATE TRIGGER tile_version_update AFTER UPDATE ON node FOR EACH ROW
  WHEN ((OLD.hash_id, OLD.name, OLD.geometry) IS DISTINCT FROM (NEW.hash_id, NEW.name, NEW.geometry))
  EXECUTE FUNCTION tile_version_row();

CREATE TRIGGER tile_version_insert AFTER INSERT ON device_link REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION tile_version_rows();
CREATE TRIGGER tile_version_delete AFTER DELETE ON device_link REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION tile_version_rows();
CREATE TRIGGER tile_version_update AFTER UPDATE ON device_link FOR EACH ROW
  WHEN ((OLD.hash_id, OLD.pin_group_id) IS DISTINCT FROM (NEW.hash_id, NEW.pin_group_id))
  EXECUTE FUNCTION tile_version_row();

-- a pin on an edge carries its pin group's issues to the edge's level
CREATE TRIGGER tile_version_insert AFTER INSERT ON pin FOR EACH ROW WHEN (NEW.edge_id IS NOT NULL) EXECUTE FUNCTION tile_version_row();
CREATE TRIGGER tile_version_delete AFTER DELETE ON pin FOR EACH ROW WHEN (OLD.edge_id IS NOT NULL) EXECUTE FUNCTION tile_version_row();
CREATE TRIGGER tile_version_update AFTER UPDATE ON pin FOR EACH ROW WHEN (OLD.edge_id IS DISTINCT FROM NEW.edge_id) EXECUTE FUNCTION tile_version_row();

-- an issue shows through its level while it is open; a level-0 issue raises nothing (a level is the highest open one, else 0).
-- Threshold batches update open issues' counters on every batch: only a change of what shows bumps the version.
CREATE TRIGGER tile_version_insert AFTER INSERT ON issue FOR EACH ROW
  WHEN (NEW.level > 0 AND NEW.closed_at IS NULL AND NEW.deleted_at IS NULL) EXECUTE FUNCTION tile_version_row();
CREATE TRIGGER tile_version_delete AFTER DELETE ON issue FOR EACH ROW
  WHEN (OLD.level > 0 AND OLD.closed_at IS NULL AND OLD.deleted_at IS NULL) EXECUTE FUNCTION tile_version_row();
CREATE TRIGGER tile_version_update AFTER UPDATE ON issue FOR EACH ROW
  WHEN (CASE WHEN OLD.closed_at IS NULL AND OLD.deleted_at IS NULL THEN OLD.level ELSE 0 END
          IS DISTINCT FROM CASE WHEN NEW.closed_at IS NULL AND NEW.deleted_at IS NULL THEN NEW.level ELSE 0 END
        OR (NEW.closed_at IS NULL AND NEW.deleted_at IS NULL AND NEW.level > 0
            AND (OLD.pin_group_id, OLD.pin_ids) IS DISTINCT FROM (NEW.pin_group_id, NEW.pin_ids)))
  EXECUTE FUNCTION tile_version_row();
