-- Reports, measurements and activities are partitioned by week (declarative RANGE partitioning).
--
-- Why weeks: 1 M devices reporting every 15 minutes write 96 M reports (and about twice as many
-- measurements) a day. Monthly partitions would hold 3 G reports each, too coarse for retention to
-- drop on time and too large to vacuum; daily partitions would be 3,650 of them at the default
-- retention of 10 years, and every query that cannot prune (a lookup by id or hashId) visits each.
-- A week is 670 M reports, and ten years are 522 partitions per table (docs/decisions.md).
--
-- The partition key is the time a reader filters on: generated_at for reports and measurements (charts,
-- measurement find, analytics, retention), created_at for activities (listed newest first). Primary
-- keys and unique constraints include it; ids keep coming from the same sequences, so every hashId,
-- id order and page is what it was.
--
-- Partitions are made ahead by the maintenance loop (src/monitoring/partitions/) through
-- gridgate_week_partition(); a row whose week has no partition yet lands in the table's default
-- partition and the loop moves it into its week's partition (made then), so an insert never fails.
--
-- The conversion is generic (columns, indexes, constraints and triggers are read from the catalog), so
-- it keeps whatever earlier migrations added to these tables.

-- the week partition of `parent` that holds `at`; made (and filled from the default partition) when missing
CREATE FUNCTION gridgate_week_partition(parent regclass, at timestamptz) RETURNS regclass LANGUAGE plpgsql AS $$
DECLARE
  week_start timestamptz := date_trunc('week', at, 'UTC');
  week_end timestamptz := week_start + interval '7 days';
  parent_name text := (SELECT relname FROM pg_class WHERE oid = parent);
  child text := parent_name || '_w' || to_char(week_start AT TIME ZONE 'UTC', 'YYYYMMDD');
  key text := (SELECT a.attname FROM pg_partitioned_table p JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]
                WHERE p.partrelid = parent);
  default_part regclass := to_regclass(parent_name || '_default');
  found_rows boolean;
BEGIN
  IF to_regclass(child) IS NOT NULL THEN RETURN to_regclass(child); END IF;
  -- one maker at a time per table; the loser of a race finds the partition made
  PERFORM pg_advisory_xact_lock(7245032, parent::oid::int);
  IF to_regclass(child) IS NOT NULL THEN RETURN to_regclass(child); END IF;
  -- made standalone and attached: ATTACH locks the parent less than CREATE ... PARTITION OF (readers and
  -- the ingest go on); the parent's indexes are built on the empty table as it is attached
  EXECUTE format('CREATE TABLE %I (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', child, parent);
  IF default_part IS NOT NULL THEN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s WHERE %I >= $1 AND %I < $2)', default_part, key, key)
      INTO found_rows USING week_start, week_end;
    IF found_rows THEN
      EXECUTE format('WITH moved AS (DELETE FROM %s WHERE %I >= $1 AND %I < $2 RETURNING *) INSERT INTO %I SELECT * FROM moved',
                     default_part, key, key, child) USING week_start, week_end;
    END IF;
  END IF;
  EXECUTE format('ALTER TABLE %s ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', parent, child, week_start, week_end);
  RETURN to_regclass(child);
END
$$;

-- `tbl` becomes a table partitioned by week on `key`, with its rows, indexes, constraints and triggers
CREATE FUNCTION pg_temp.partition_by_week(tbl text, key text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  old_name text := tbl || '_unpartitioned';
  defs text[];
  constraint_defs text[];
  trigger_defs text[];
  def text;
  seq text;
  col record;
  week timestamptz;
BEGIN
  -- what the table has, before it is renamed: constraints (primary key, unique) get the key added
  SELECT coalesce(array_agg(format('ALTER TABLE %I ADD CONSTRAINT %I %s', tbl, c.conname,
           CASE WHEN c.contype IN ('p', 'u') AND NOT (SELECT attnum FROM pg_attribute WHERE attrelid = c.conrelid AND attname = key) = ANY (c.conkey)
                THEN regexp_replace(pg_get_constraintdef(c.oid), '\)$', format(', %I)', key))
                ELSE pg_get_constraintdef(c.oid) END)), '{}')
    INTO constraint_defs FROM pg_constraint c WHERE c.conrelid = tbl::regclass AND c.contype IN ('p', 'u', 'c');
  SELECT coalesce(array_agg(pg_get_indexdef(i.indexrelid)), '{}') INTO defs
    FROM pg_index i WHERE i.indrelid = tbl::regclass
     AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid);
  IF EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = tbl::regclass AND i.indisunique
              AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)) THEN
    RAISE EXCEPTION 'unique index on % outside a constraint: give it the partition key by hand', tbl;
  END IF;
  SELECT coalesce(array_agg(pg_get_triggerdef(t.oid)), '{}') INTO trigger_defs
    FROM pg_trigger t WHERE t.tgrelid = tbl::regclass AND NOT t.tgisinternal;

  EXECUTE format('ALTER TABLE %I RENAME TO %I', tbl, old_name);
  FOR def IN SELECT c.conname FROM pg_constraint c WHERE c.conrelid = old_name::regclass AND c.contype IN ('p', 'u', 'c') LOOP
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', old_name, def);
  END LOOP;
  FOR def IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = old_name::regclass LOOP
    EXECUTE format('DROP INDEX %I', def);
  END LOOP;
  FOR def IN SELECT t.tgname FROM pg_trigger t WHERE t.tgrelid = old_name::regclass AND NOT t.tgisinternal LOOP
    EXECUTE format('DROP TRIGGER %I ON %I', def, old_name);
  END LOOP;

  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS) PARTITION BY RANGE (%I)', tbl, old_name, key);
  EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', tbl || '_default', tbl);
  -- serial columns: their sequence now belongs to the new table
  FOR col IN SELECT a.attname FROM pg_attribute a WHERE a.attrelid = old_name::regclass AND a.attnum > 0 AND NOT a.attisdropped LOOP
    seq := pg_get_serial_sequence(old_name, col.attname);
    IF seq IS NOT NULL THEN EXECUTE format('ALTER SEQUENCE %s OWNED BY %I.%I', seq, tbl, col.attname); END IF;
  END LOOP;
  FOREACH def IN ARRAY constraint_defs LOOP EXECUTE def; END LOOP;
  FOREACH def IN ARRAY defs LOOP EXECUTE def; END LOOP;

  -- a partition for every week that has rows, and for this week and the next four
  FOR week IN EXECUTE format('SELECT DISTINCT date_trunc(''week'', %I, ''UTC'') FROM %I', key, old_name) LOOP
    PERFORM gridgate_week_partition(tbl::regclass, week);
  END LOOP;
  FOR week IN SELECT generate_series(now(), now() + interval '4 weeks', interval '1 week') LOOP
    PERFORM gridgate_week_partition(tbl::regclass, week);
  END LOOP;
  EXECUTE format('INSERT INTO %I SELECT * FROM %I', tbl, old_name);
  EXECUTE format('DROP TABLE %I', old_name);
  -- after the copy: the rows moved are not new to a trigger (the charts' hourly rollup has them)
  FOREACH def IN ARRAY trigger_defs LOOP EXECUTE def; END LOOP;
  EXECUTE format('ANALYZE %I', tbl);
END
$$;

SELECT pg_temp.partition_by_week('condition_report', 'generated_at');
SELECT pg_temp.partition_by_week('measurement', 'generated_at');
SELECT pg_temp.partition_by_week('supplier_activity', 'created_at');
