-- Exports in turns across environments (src/monitoring/exports/queue.ts): an export's job is queued only once the
-- export is admitted (admitted_at), and an environment has at most EXPORT_CONCURRENCY exports admitted or being
-- written at a time, so one environment's many exports wait their turns instead of the queue. An export that
-- cannot be written (its analytics query ran out of its statement timeout) ends as status 'deleted' with its
-- reason in error.
ALTER TABLE export_request ADD COLUMN admitted_at timestamptz, ADD COLUMN error text;
-- the jobs of requests made before this migration are queued already
UPDATE export_request SET admitted_at = created_at WHERE status IN ('waiting', 'creating');
CREATE INDEX export_request_unfinished ON export_request (environment_id, id) WHERE status IN ('waiting', 'creating');
