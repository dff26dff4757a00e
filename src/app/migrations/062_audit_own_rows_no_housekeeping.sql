-- The audit trail logs an account's changes to its own environment's rows, never housekeeping, and never the bytes of
-- a large value.
--
-- 1. The partition maker (032) moves rows out of a default partition: housekeeping, nobody's change. It runs with no
--    author whoever calls it, so the triggers it fires on the rows it moves log nothing (a pooled connection that last
--    served an API operation once lent that operation's author to it: another tenant's moved rows landed in that
--    operation's environment's log).
ALTER FUNCTION gridgate_week_partition(regclass, timestamptz) SET gridgate.audit = '';

-- 2. audit_function_source (061) with two changes; audit_attach_all() replaces each table's function whose source
--    differs, so every table gets them at the next migration run.
--    - A row is logged only when its environment is the author's: its environment_id; the environment table's own id;
--      for a table without one (an issue's comments and events, a grid's members), the environment of the row its
--      first foreign key names whose table has one. A write of one environment's operation that reaches another's
--      row (a customer claiming a supplier's device, a threshold check that writes the issues of every environment
--      waiting in memory) does not copy that row into the operation's log, and no author lent by mistake can put
--      one tenant's rows in another's log.
--    - A bytea value (a firmware image, a sealed key) is logged as {"bytes", "sha256"}, and so is any other value
--      stored larger than 4 KiB (a photo or a logo as a data: URL, a settings object holding one): a log row stays
--      small whatever the object holds, and still tells whether the value changed and what it became.
CREATE FUNCTION audit_blob(b bytea) RETURNS jsonb LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT jsonb_build_object('bytes', octet_length(b), 'sha256', encode(sha256(b), 'hex'))
$$;

CREATE OR REPLACE FUNCTION audit_function_source(t oid) RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
  object_type text := (SELECT audit_object_type(relname) FROM pg_class WHERE oid = t);
  has_hash_id boolean := false;
  has_deleted_at boolean := false;
  own_environment text := NULL;
  old_diff text[] := '{}';
  new_diff text[] := '{}';
  old_row text[] := '{}';
  new_row text[] := '{}';
  c record;
  credential constant text := '(secret|sealed|password|token|private|totp|_sha256)';
  diff_of constant text := 'CASE WHEN OLD.%1$I%2$s IS DISTINCT FROM NEW.%1$I%2$s THEN jsonb_build_object(%1$L, %3$s) ELSE ''{}''::jsonb END';
  author constant text := $a$current_setting('gridgate.audit', true)::jsonb$a$;
  insert_into constant text := 'INSERT INTO audit_log (environment_id, user_hash_id, object_type, object_hash_id, action, diff) SELECT (a ->> ''e'')::bigint, a ->> ''u'', ';
BEGIN
  -- `comparable`: the type has a default btree operator class (arrays compare element by element); others (json,
  -- point) are compared as text; `varlena`: stored with a length, so possibly large
  FOR c IN SELECT a.attname::text AS name, a.attname ~ credential AS secret, y.typname = 'bytea' AS binary, a.attlen = -1 AS varlena,
                  y.typcategory = 'A' OR EXISTS (SELECT 1 FROM pg_opclass o JOIN pg_am m ON m.oid = o.opcmethod
                                                   WHERE m.amname = 'btree' AND o.opcdefault AND o.opcintype = y.oid) AS comparable
             FROM pg_attribute a JOIN pg_type y ON y.oid = a.atttypid
            WHERE a.attrelid = t AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum LOOP
    IF c.name = 'hash_id' THEN has_hash_id := true; END IF;
    IF c.name = 'deleted_at' THEN has_deleted_at := true; END IF;
    IF c.name = 'environment_id' THEN own_environment := '%1$s.environment_id'; END IF;
    CONTINUE WHEN c.name IN ('id', 'environment_id');
    -- the column's logged value in the row `%1$s` (OLD or NEW): a credential's never appears
    DECLARE v text := CASE
      WHEN c.secret THEN '''[redacted]''::text'
      WHEN c.binary THEN 'audit_blob(%1$s.' || quote_ident(c.name) || ')'
      WHEN c.varlena THEN format('CASE WHEN pg_column_size(%%1$s.%1$I) > 4096 THEN audit_blob(convert_to(%%1$s.%1$I::text, ''UTF8'')) ELSE to_jsonb(%%1$s.%1$I) END', c.name)
      ELSE 'to_jsonb(%1$s.' || quote_ident(c.name) || ')' END;
    BEGIN
      old_row := old_row || format('%L, %s', c.name, format(v, 'OLD'));
      new_row := new_row || format('%L, %s', c.name, format(v, 'NEW'));
      CONTINUE WHEN c.name = 'updated_at';
      -- the column as a one-key object when it changed, else an empty one
      old_diff := old_diff || format(diff_of, c.name, CASE WHEN c.comparable THEN '' ELSE '::text' END, format(v, 'OLD'));
      new_diff := new_diff || format(diff_of, c.name, CASE WHEN c.comparable THEN '' ELSE '::text' END, format(v, 'NEW'));
    END;
  END LOOP;
  IF own_environment IS NULL AND (SELECT relname FROM pg_class WHERE oid = t) = 'environment' THEN own_environment := '%1$s.id'; END IF;
  IF own_environment IS NULL THEN
    SELECT format('(SELECT p.environment_id FROM %s p WHERE p.%I = %%1$s.%I)', f.confrelid::regclass, r.attname, a.attname) INTO own_environment
      FROM pg_constraint f
      JOIN pg_attribute a ON a.attrelid = f.conrelid AND a.attnum = f.conkey[1]
      JOIN pg_attribute r ON r.attrelid = f.confrelid AND r.attnum = f.confkey[1]
     WHERE f.conrelid = t AND f.contype = 'f' AND cardinality(f.conkey) = 1
       AND EXISTS (SELECT 1 FROM pg_attribute e WHERE e.attrelid = f.confrelid AND e.attname = 'environment_id' AND NOT e.attisdropped)
     ORDER BY a.attnotnull DESC, a.attnum LIMIT 1;
  END IF;
  RETURN format($f$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    %1$s%2$L, %3$s, %4$s, jsonb_build_object('old', o, 'new', n)
      FROM (SELECT %5$s AS a, %6$s AS o, %7$s AS n) x WHERE n <> '{}'::jsonb%11$s;
  ELSIF TG_OP = 'INSERT' THEN
    %1$s%2$L, %8$s, 'create', jsonb_build_object('old', NULL, 'new', %9$s)
      FROM (SELECT %5$s AS a) x WHERE true%11$s;
  ELSE
    %1$s%2$L, %10$s, 'delete', jsonb_build_object('old', %12$s, 'new', NULL)
      FROM (SELECT %5$s AS a) x WHERE true%13$s;
  END IF;
  RETURN NULL;
END$f$,
    insert_into, object_type,
    CASE WHEN has_hash_id THEN 'NEW.hash_id' ELSE 'NULL' END,
    CASE WHEN has_deleted_at THEN $d$CASE WHEN OLD.deleted_at IS NULL AND NEW.deleted_at IS NOT NULL THEN 'delete' ELSE 'update' END$d$ ELSE $d$'update'$d$ END,
    author,
    CASE WHEN cardinality(old_diff) = 0 THEN '''{}''::jsonb' ELSE array_to_string(old_diff, ' || ') END,
    CASE WHEN cardinality(new_diff) = 0 THEN '''{}''::jsonb' ELSE array_to_string(new_diff, ' || ') END,
    CASE WHEN has_hash_id THEN 'NEW.hash_id' ELSE 'NULL' END,
    audit_row_object(new_row),
    CASE WHEN has_hash_id THEN 'OLD.hash_id' ELSE 'NULL' END,
    CASE WHEN own_environment IS NULL THEN '' ELSE format(' AND (a ->> ''e'')::bigint = ' || own_environment, 'NEW') END,
    audit_row_object(old_row),
    CASE WHEN own_environment IS NULL THEN '' ELSE format(' AND (a ->> ''e'')::bigint = ' || own_environment, 'OLD') END);
END $$;

-- A row as one jsonb object from its `'name', value` pairs: jsonb_build_object takes at most 100 arguments, so wider
-- rows are built from several and joined.
CREATE FUNCTION audit_row_object(pairs text[]) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN cardinality(pairs) = 0 THEN '''{}''::jsonb' ELSE
    (SELECT string_agg('jsonb_build_object(' || array_to_string(pairs[i:i + 49], ', ') || ')', ' || ' ORDER BY i)
       FROM generate_series(1, cardinality(pairs), 50) AS i) END
$$;

SELECT audit_attach_all();
