-- The SHA-256 of a supplier certificate's public key (its SubjectPublicKeyInfo DER, hex). One key is certified by
-- one live supplier certificate at most: two certificates of one key (in two environments) would both sign the
-- same device chains, and a device would land in whichever environment's anchor came first. Rows stored before
-- this column have none: each add reads their certificates, and one that succeeds records their keys (SQL cannot
-- parse X.509).
ALTER TABLE supplier_certificate ADD COLUMN public_key_sha256 text;
CREATE INDEX supplier_certificate_key ON supplier_certificate (public_key_sha256) WHERE deleted_at IS NULL;
