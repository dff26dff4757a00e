-- The audit trail (src/audit/): a row per row changed through the API, written by a trigger in the transaction
-- of the change. Before an API operation's write the Db sets `gridgate.audit` to the author's {"e": environmentId,
-- "u": userHashId} (src/app/db.ts); writes without it ('' or unset: devices, workers, migrations) leave no row.
CREATE TABLE audit_log (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE DEFAULT substr(md5(random()::text || clock_timestamp()::text), 1, 10),
  -- no foreign key: the log of an environment's deletion is written while its row goes
  environment_id bigint NOT NULL,
  user_hash_id   text,
  object_type    text NOT NULL,
  object_hash_id text,
  action         text NOT NULL,
  diff           jsonb,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_object ON audit_log (environment_id, object_type, object_hash_id, id);
CREATE INDEX audit_log_env ON audit_log (environment_id, id);

-- columns whose values never enter the log (credentials, sealed keys, token digests): named, valued "[redacted]"
CREATE FUNCTION audit_redact(r jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN r IS NULL THEN NULL ELSE coalesce(jsonb_object_agg(key, CASE WHEN key ~ '(secret|sealed|password|token|private|totp|_sha256)' THEN '"[redacted]"'::jsonb ELSE value END), '{}'::jsonb) END
    FROM jsonb_each(r)
$$;

CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  author jsonb := current_setting('gridgate.audit', true)::jsonb;
  old_row jsonb;
  new_row jsonb;
  act text := CASE TG_OP WHEN 'INSERT' THEN 'create' ELSE lower(TG_OP) END;
  object_hash_id text;
BEGIN
  -- the row's own and its environment's internal ids are no part of what changed (the object is named by hash_id)
  IF TG_OP <> 'INSERT' THEN old_row := to_jsonb(OLD) - 'id' - 'environment_id'; END IF;
  IF TG_OP <> 'DELETE' THEN new_row := to_jsonb(NEW) - 'id' - 'environment_id'; END IF;
  object_hash_id := coalesce(new_row, old_row) ->> 'hash_id';
  IF TG_OP = 'UPDATE' THEN
    -- only what changed (updated_at always does: it is not a change of its own)
    SELECT jsonb_object_agg(o.key, o.value), jsonb_object_agg(o.key, new_row -> o.key)
      INTO old_row, new_row
      FROM jsonb_each(old_row) o
     WHERE o.value IS DISTINCT FROM new_row -> o.key AND o.key <> 'updated_at';
    IF old_row IS NULL THEN RETURN NULL; END IF;
    -- a soft delete is a delete
    IF new_row ? 'deleted_at' AND old_row -> 'deleted_at' = 'null'::jsonb THEN act := 'delete'; END IF;
  END IF;
  INSERT INTO audit_log (environment_id, user_hash_id, object_type, object_hash_id, action, diff)
  VALUES ((author ->> 'e')::bigint, author ->> 'u',
          -- the SDK's names: pin_group -> pinGroup
          (SELECT string_agg(CASE WHEN i = 1 THEN p ELSE initcap(p) END, '' ORDER BY i)
             FROM unnest(string_to_array(TG_TABLE_NAME, '_')) WITH ORDINALITY AS x(p, i)),
          object_hash_id, act,
          jsonb_build_object('old', audit_redact(old_row), 'new', audit_redact(new_row)));
  RETURN NULL;
END $$;

-- Puts the trigger on every table of the schema that lacks it (but those below) (run after each migration run, so tables that later
-- migrations add are covered without naming them); the WHEN keeps writes without an author from calling it at all.
CREATE FUNCTION audit_attach_all() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE t record; n integer := 0;
BEGIN
  FOR t IN
    SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
     WHERE s.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
       -- the log itself, bookkeeping, and the data devices write: an operation that rewrites measurements in bulk
       -- (a quantity merge) would log each of millions; it shows through the rows it changes elsewhere
       AND c.relname NOT IN ('audit_log', 'schema_migrations', 'wal_flush_barrier',
                             'measurement', 'measurement_hourly', 'supplier_activity', 'device_counter_hour')
       AND NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = 'audit_change')
  LOOP
    EXECUTE format('CREATE TRIGGER audit_change AFTER INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW '
                   'WHEN (current_setting(''gridgate.audit'', true) <> '''') EXECUTE FUNCTION audit_row()', t.relname);
    n := n + 1;
  END LOOP;
  RETURN n;
END $$;
