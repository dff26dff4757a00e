-- Supplier certificates: intermediate CAs the device CA signed from a supplier's CSR. A device
-- certificate they sign is identified by the supplier's identifier function. Soft-deleted; a
-- deleted one is no longer a trust anchor.
CREATE TABLE supplier_certificate (
  id               bigserial PRIMARY KEY,
  hash_id          text NOT NULL UNIQUE,
  environment_id   bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  name             text NOT NULL,
  certificate      text NOT NULL,
  fingerprint      text NOT NULL,
  identifier       text NOT NULL,
  identifier_hash  text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  deleted_at       timestamptz
);
CREATE INDEX supplier_certificate_env ON supplier_certificate (environment_id, id);
CREATE INDEX supplier_certificate_live ON supplier_certificate (id) WHERE deleted_at IS NULL;
