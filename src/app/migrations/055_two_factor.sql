-- Two-factor authentication (TOTP) of an account. The keys are sealed with a key derived from
-- SECRET_KEY (AES-256-GCM, the account's hashId as associated data), as device keys are.
-- pending_secret: made by get-keyuri, becomes secret when enable checks a code made from it.
-- enabled_at: stamped into the tokens a 2FA login or enable issues; a token without it is refused.
-- last_step: the newest TOTP step accepted, so a code cannot be used twice.
CREATE TABLE account_two_factor (
  account_id     bigint PRIMARY KEY REFERENCES machine_account(id) ON DELETE CASCADE,
  pending_secret bytea,
  secret         bytea,
  enabled_at     timestamptz,
  last_step      bigint,
  CHECK ((secret IS NULL) = (enabled_at IS NULL))
);
