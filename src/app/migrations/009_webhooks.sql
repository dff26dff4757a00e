-- Supplier webhooks: a URL a third party (a LoRaWAN network server, a gateway vendor's cloud)
-- posts device data to. The secret in the URL is sealed (AES-256-GCM under the server key),
-- not hashed: the API shows the URL again on get and find, as the SDK does.
CREATE TABLE supplier_webhook (
  id              bigserial PRIMARY KEY,
  hash_id         text NOT NULL UNIQUE,
  environment_id  bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name            text NOT NULL,
  identifier      text NOT NULL,
  identifier_hash text NOT NULL,
  secret_sealed   bytea NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  deleted_at      timestamptz
);
CREATE INDEX supplier_webhook_env ON supplier_webhook (environment_id, id);
