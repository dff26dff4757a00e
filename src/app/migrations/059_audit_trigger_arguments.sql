-- The audit trigger of 045, cheaper per row (bench/README.md, "Audit trail cost"): what depends only on the table
-- is worked out once, when the trigger is attached, and handed to it as arguments: the object type (the table's
-- SDK name) and the columns whose values are redacted. Per row, 045 spent more on these than on the log row itself:
-- audit_redact, an SQL function PostgreSQL plans on every call, ran a regular expression over every column of the
-- old and the new row, and the object type was an aggregate over the table's name. The log's rows stay the same.

-- the SDK's name of a table's objects: pin_group -> pinGroup
CREATE FUNCTION audit_object_type(table_name name) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT string_agg(CASE WHEN i = 1 THEN p ELSE initcap(p) END, '' ORDER BY i)
    FROM unnest(string_to_array(table_name, '_')) WITH ORDINALITY AS x(p, i)
$$;

-- the audit trigger's arguments for table `t`: its object type, then its columns whose values never enter the log
-- (credentials, sealed keys, token digests: named, valued "[redacted]")
CREATE FUNCTION audit_trigger_args(t oid) RETURNS text[] LANGUAGE sql STABLE AS $$
  SELECT audit_object_type(c.relname) || coalesce(array_agg(a.attname::text ORDER BY a.attnum) FILTER (WHERE a.attname IS NOT NULL), '{}')
    FROM pg_class c
    LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                            AND a.attname ~ '(secret|sealed|password|token|private|totp|_sha256)'
   WHERE c.oid = t
   GROUP BY c.relname
$$;

-- TG_ARGV[0]: the object type; TG_ARGV[1..]: the columns whose values are logged as "[redacted]"
CREATE OR REPLACE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
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
  FOR i IN 1 .. TG_NARGS - 1 LOOP
    IF old_row ? TG_ARGV[i] THEN old_row := jsonb_set(old_row, ARRAY[TG_ARGV[i]], '"[redacted]"'); END IF;
    IF new_row ? TG_ARGV[i] THEN new_row := jsonb_set(new_row, ARRAY[TG_ARGV[i]], '"[redacted]"'); END IF;
  END LOOP;
  INSERT INTO audit_log (environment_id, user_hash_id, object_type, object_hash_id, action, diff)
  VALUES ((author ->> 'e')::bigint, author ->> 'u', TG_ARGV[0], object_hash_id, act, jsonb_build_object('old', old_row, 'new', new_row));
  RETURN NULL;
END $$;

-- As 045's, and also puts the trigger back where its arguments no longer match the table (a later migration renamed
-- it, or added or renamed a credential column), so the arguments follow the schema.
CREATE OR REPLACE FUNCTION audit_attach_all() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE t record; n integer := 0;
BEGIN
  FOR t IN
    SELECT c.relname, args.a AS args,
           (SELECT g.tgargs FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = 'audit_change') AS current_args
      FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace, LATERAL (SELECT audit_trigger_args(c.oid) AS a) args
     WHERE s.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
       -- the log itself, bookkeeping, and the data devices write: an operation that rewrites measurements in bulk
       -- (a quantity merge) would log each of millions; it shows through the rows it changes elsewhere
       AND c.relname NOT IN ('audit_log', 'schema_migrations', 'wal_flush_barrier',
                             'measurement', 'measurement_hourly', 'supplier_activity', 'device_counter_hour')
  LOOP
    -- pg_trigger.tgargs holds the arguments, each ended by a zero byte
    CONTINUE WHEN t.current_args IS NOT DISTINCT FROM
      (SELECT string_agg(convert_to(a, 'UTF8') || '\x00'::bytea, ''::bytea ORDER BY i) FROM unnest(t.args) WITH ORDINALITY AS x(a, i));
    EXECUTE format('CREATE OR REPLACE TRIGGER audit_change AFTER INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW '
                   'WHEN (current_setting(''gridgate.audit'', true) <> '''') EXECUTE FUNCTION audit_row(%s)',
                   t.relname, (SELECT string_agg(quote_literal(a), ', ') FROM unnest(t.args) a));
    n := n + 1;
  END LOOP;
  RETURN n;
END $$;

SELECT audit_attach_all();

-- 045's per-row redaction, replaced by the trigger's arguments
DROP FUNCTION audit_redact(jsonb);
