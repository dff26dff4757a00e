-- People of an environment (the SDK's user routes). A person is a row of machine_account of kind
-- 'person': it has a name, an address, rights and its own settings like a machine account, so every
-- table that names an account (issue subscriptions, grid notifications, supplier subscriptions, mails)
-- names people too, but it has no secret and never logs in. A machine account is a user of its
-- environment as well, with an address when the operator gave it one. Deleting a user revokes the row.
ALTER TABLE machine_account ADD COLUMN IF NOT EXISTS email text;
ALTER TABLE machine_account ADD COLUMN IF NOT EXISTS locale text;
ALTER TABLE machine_account ADD COLUMN IF NOT EXISTS timezone text;
ALTER TABLE machine_account ADD COLUMN kind text NOT NULL DEFAULT 'machine' CHECK (kind IN ('machine', 'person'));
ALTER TABLE machine_account ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE machine_account ALTER COLUMN secret_hash DROP NOT NULL;
ALTER TABLE machine_account ADD CONSTRAINT machine_account_secret CHECK ((kind = 'machine') = (secret_hash IS NOT NULL));
-- one live user per address and environment
CREATE UNIQUE INDEX machine_account_email ON machine_account (environment_id, lower(email)) WHERE revoked_at IS NULL AND email IS NOT NULL;
CREATE INDEX machine_account_environment ON machine_account (environment_id, id) WHERE revoked_at IS NULL;
