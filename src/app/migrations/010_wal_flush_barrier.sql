-- One row whose update is a WAL-logged write committed synchronously: committing it flushes the WAL up to
-- its commit record, and with it every commit made before it with synchronous_commit off (Db.flushed()).
CREATE TABLE wal_flush_barrier (
  id  smallint PRIMARY KEY,
  at  timestamptz NOT NULL
);
INSERT INTO wal_flush_barrier (id, at) VALUES (1, now());
