-- The log row's hashId keeps its random value but loses 045's unique index. No query looks a log row up by it
-- (find-log searches by environment and object, in id order), and its keys are random: on a log of 150,000 rows
-- nearly every audited write put a full-page image of a leaf of this index into the WAL (7.8 kB, against 0.5 kB
-- for the rest of the log row: bench/README.md, "Audit trail cost"). Its uniqueness check also turned a repeat
-- of a random 10-character hashId into a failure of the change being logged.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_hash_id_key;
