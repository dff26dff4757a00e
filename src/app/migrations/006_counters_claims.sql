-- Connectivity counters: per device, counter key and hour. Redis holds the live hourly hashes
-- (`counters:<deviceHashId>:<yyyy-mm-ddThh>`, with a TTL); a flusher copies touched hashes here as
-- absolute values, so a repeated or reordered flush is harmless (GREATEST on conflict).
CREATE TABLE device_counter_hour (
  device_id bigint NOT NULL REFERENCES device(id) ON DELETE CASCADE,
  hour      timestamptz NOT NULL,
  key       text NOT NULL,
  value     bigint NOT NULL,
  PRIMARY KEY (device_id, hour, key)
);
-- rows arrive roughly in hour order: a BRIN index makes the retention prune cheap at little write cost
CREATE INDEX device_counter_hour_brin ON device_counter_hour USING brin (hour);

-- Claiming: the monitoring environment that holds a device (null while the supplier holds it).
ALTER TABLE device
  ADD COLUMN claimed_environment_id bigint REFERENCES environment(id) ON DELETE SET NULL,
  ADD COLUMN claimed_at timestamptz;
CREATE INDEX device_claimed_env ON device (claimed_environment_id) WHERE claimed_environment_id IS NOT NULL;

-- At most one live claim token per device (a new one replaces the old); only its SHA-256 is kept.
CREATE TABLE device_claim_token (
  device_id      bigint PRIMARY KEY REFERENCES device(id) ON DELETE CASCADE,
  token_sha256   bytea NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  created_at     timestamptz NOT NULL DEFAULT now()
);
