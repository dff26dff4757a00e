-- The audit trigger of 045/059, cheaper per row (bench/README.md, "Audit trail cost"): each audited table gets a
-- trigger function of its own, generated from its columns when `audit_attach_all()` attaches it, so a row's log entry
-- is one INSERT ... SELECT whose diff compares the columns by name and type (`OLD.c IS DISTINCT FROM NEW.c`) and turns
-- only the changed ones into JSON. 059's function turned both whole rows into jsonb and compared them key by key in a
-- query of its own (jsonb_each, two aggregates), and the log row paid a primary key index nothing reads and an md5
-- for its hashId: on a label update the log cost PostgreSQL 93-116 µs with 059's function and 48-53 µs with these.
-- The log's rows stay the same.

-- The log's primary key becomes (environment_id, id), the index find-log reads an environment's log by (it was a
-- second index beside the key on id alone, which nothing reads), and its random hashId is drawn without md5 and
-- without formatting a timestamp: ten hex digits of random() (no query looks a log row up by it: 060).
ALTER TABLE audit_log DROP CONSTRAINT audit_log_pkey;
DROP INDEX audit_log_env;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_pkey PRIMARY KEY (environment_id, id);
ALTER TABLE audit_log ALTER COLUMN hash_id SET DEFAULT lpad(to_hex((random() * 1099511627775)::bigint), 10, '0');

-- the trigger function's name for table `t` (within the 63 bytes of a name)
CREATE FUNCTION audit_function_name(t name) RETURNS name LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN length(t) <= 53 THEN 'audit_row_' || t ELSE 'audit_row_' || left(t, 40) || '_' || left(md5(t), 8) END
$$;

-- The body of table `t`'s trigger function. Per row: the author from `gridgate.audit` ({"e": environmentId, "u":
-- userHashId}); the object type, the table's SDK name; the object's hashId (its hash_id column, if it has one); for
-- an insert the new row, for a delete the old one, for an update the columns that changed (updated_at is no change of
-- its own; a soft delete, deleted_at set, is a delete); the row's own and its environment's ids are left out, and
-- the values of credential columns (secret, sealed, password, token, private, totp, _sha256) are "[redacted]".
CREATE FUNCTION audit_function_source(t oid) RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
  object_type text := (SELECT audit_object_type(relname) FROM pg_class WHERE oid = t);
  has_hash_id boolean := false;
  has_deleted_at boolean := false;
  redacted jsonb := '{}';
  old_diff text[] := '{}';
  new_diff text[] := '{}';
  c record;
  credential constant text := '(secret|sealed|password|token|private|totp|_sha256)';
  diff_of constant text := 'CASE WHEN OLD.%1$I%2$s IS DISTINCT FROM NEW.%1$I%2$s THEN jsonb_build_object(%1$L, %3$s) ELSE ''{}''::jsonb END';
  author constant text := $a$current_setting('gridgate.audit', true)::jsonb$a$;
  insert_into constant text := 'INSERT INTO audit_log (environment_id, user_hash_id, object_type, object_hash_id, action, diff) SELECT (a ->> ''e'')::bigint, a ->> ''u'', ';
BEGIN
  -- `comparable`: the type has a default btree operator class (arrays compare element by element); others (json,
  -- point) are compared as text
  FOR c IN SELECT a.attname::text AS name, a.attname ~ credential AS secret,
                  y.typcategory = 'A' OR EXISTS (SELECT 1 FROM pg_opclass o JOIN pg_am m ON m.oid = o.opcmethod
                                                   WHERE m.amname = 'btree' AND o.opcdefault AND o.opcintype = y.oid) AS comparable
             FROM pg_attribute a JOIN pg_type y ON y.oid = a.atttypid
            WHERE a.attrelid = t AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum LOOP
    IF c.name = 'hash_id' THEN has_hash_id := true; END IF;
    IF c.name = 'deleted_at' THEN has_deleted_at := true; END IF;
    CONTINUE WHEN c.name IN ('id', 'environment_id', 'updated_at');
    IF c.secret THEN redacted := redacted || jsonb_build_object(c.name, '[redacted]'); END IF;
    -- the column as a one-key object when it changed, else an empty one; a credential's value never appears
    old_diff := old_diff || format(diff_of, c.name, CASE WHEN c.comparable THEN '' ELSE '::text' END, CASE WHEN c.secret THEN '''[redacted]''::text' ELSE 'OLD.' || quote_ident(c.name) END);
    new_diff := new_diff || format(diff_of, c.name, CASE WHEN c.comparable THEN '' ELSE '::text' END, CASE WHEN c.secret THEN '''[redacted]''::text' ELSE 'NEW.' || quote_ident(c.name) END);
  END LOOP;
  RETURN format($f$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    %1$s%2$L, %3$s, %4$s, jsonb_build_object('old', o, 'new', n)
      FROM (SELECT %5$s AS a, %6$s AS o, %7$s AS n) x WHERE n <> '{}'::jsonb;
  ELSIF TG_OP = 'INSERT' THEN
    %1$s%2$L, %8$s, 'create', jsonb_build_object('old', NULL, 'new', to_jsonb(NEW) - '{id,environment_id}'::text[] || %9$L::jsonb)
      FROM (SELECT %5$s AS a) x;
  ELSE
    %1$s%2$L, %10$s, 'delete', jsonb_build_object('old', to_jsonb(OLD) - '{id,environment_id}'::text[] || %9$L::jsonb, 'new', NULL)
      FROM (SELECT %5$s AS a) x;
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
    redacted::text,
    CASE WHEN has_hash_id THEN 'OLD.hash_id' ELSE 'NULL' END);
END $$;

-- Puts on every table of the schema (but those below) its own trigger function and the trigger that calls it, and
-- replaces a function whose source no longer matches its table (a later migration added, renamed or dropped a
-- column, or renamed the table); run after each migration run (src/app/db.ts). Functions of tables gone are dropped.
CREATE OR REPLACE FUNCTION audit_attach_all() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE t record; n integer := 0;
BEGIN
  FOR t IN
    SELECT c.oid, c.relname, audit_function_name(c.relname) AS fname, audit_function_source(c.oid) AS source
      FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
     WHERE s.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
       -- the log itself, bookkeeping, and the data devices write: an operation that rewrites measurements in bulk
       -- (a quantity merge) would log each of millions; it shows through the rows it changes elsewhere
       AND c.relname NOT IN ('audit_log', 'schema_migrations', 'wal_flush_barrier',
                             'measurement', 'measurement_hourly', 'supplier_activity', 'device_counter_hour')
  LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_proc p WHERE p.proname = t.fname AND p.pronamespace = current_schema()::regnamespace AND p.prosrc = t.source) THEN
      EXECUTE format('CREATE OR REPLACE FUNCTION %I() RETURNS trigger LANGUAGE plpgsql AS %L', t.fname, t.source);
      n := n + 1;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = t.oid AND g.tgname = 'audit_change'
                      AND g.tgfoid = format('%I()', t.fname)::regprocedure AND g.tgnargs = 0) THEN
      -- the WHEN keeps writes without an author (devices, workers, migrations) from calling it at all
      EXECUTE format('CREATE OR REPLACE TRIGGER audit_change AFTER INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW '
                     'WHEN (current_setting(''gridgate.audit'', true) <> '''') EXECUTE FUNCTION %I()', t.relname, t.fname);
      n := n + 1;
    END IF;
  END LOOP;
  -- the functions of tables renamed or dropped, which no trigger calls any more
  FOR t IN
    SELECT p.oid::regprocedure AS f FROM pg_proc p
     WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'audit\_row\_%' AND p.pronargs = 0
       AND NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgfoid = p.oid)
  LOOP
    EXECUTE format('DROP FUNCTION %s', t.f);
  END LOOP;
  RETURN n;
END $$;

SELECT audit_attach_all();

-- 059's generic trigger function and its arguments, replaced by the functions above
DROP FUNCTION audit_row();
DROP FUNCTION audit_trigger_args(oid);
