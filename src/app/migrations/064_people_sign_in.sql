-- People sign in to the console (src/accounts/people/). A person is every live row of machine_account of kind
-- 'person' with one address (case-insensitive), one row per environment; what they share is kept here, under the
-- lower-cased address: one password for all their environments, the environment they used last, the one-time
-- tokens of their invitation and reset mails, and their sessions.

-- a person's rows in every environment, found by address at sign-in
CREATE INDEX machine_account_person_email ON machine_account (lower(email)) WHERE kind = 'person' AND revoked_at IS NULL;

-- password_hash: scrypt$N$r$p$salt$hash (docs/decisions.md, "People's passwords")
CREATE TABLE person_login (
  email               text PRIMARY KEY CHECK (email = lower(email)),
  password_hash       text NOT NULL,
  password_set_at     timestamptz NOT NULL DEFAULT now(),
  last_environment_id bigint REFERENCES environment(id) ON DELETE SET NULL
);

-- a token of an invitation (7 days) or reset (1 hour) mail, only as its sha256; good once. notification_hash_id: the
-- stored mail that carries it, whose link is struck out once the token is used
CREATE TABLE person_token (
  token_sha256         bytea PRIMARY KEY,
  email                text NOT NULL CHECK (email = lower(email)),
  purpose              text NOT NULL CHECK (purpose IN ('invitation', 'reset')),
  notification_hash_id text,
  created_at           timestamptz NOT NULL DEFAULT now(),
  expires_at           timestamptz NOT NULL,
  used_at              timestamptz
);
CREATE INDEX person_token_email ON person_token (email);

-- a console session: the cookie's token only as its sha256, the row (environment) it acts as, and the two-factor
-- enabled_at of that row it was verified for (a session of a row that turns two-factor on elsewhere stops working)
CREATE TABLE person_session (
  id               bigserial PRIMARY KEY,
  token_sha256     bytea NOT NULL UNIQUE,
  email            text NOT NULL CHECK (email = lower(email)),
  account_id       bigint NOT NULL REFERENCES machine_account(id) ON DELETE CASCADE,
  second_factor_at timestamptz,
  user_agent       text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  last_seen_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX person_session_email ON person_session (email);
CREATE INDEX person_session_account ON person_session (account_id);

ALTER TABLE notification DROP CONSTRAINT notification_kind_check;
ALTER TABLE notification ADD CONSTRAINT notification_kind_check
  CHECK (kind IN ('issue', 'issueDigest', 'supplierAlert', 'command', 'feedback', 'invitation', 'passwordReset', 'environmentAdded'));
