-- environment add and supplier add: an environment made through the API remembers the environment
-- the operator made that it descends from (its origin), so everything one customer adds, and what its
-- new environments add in turn, counts against one ENVIRONMENT_ADD_LIMIT.
ALTER TABLE environment ADD COLUMN origin_environment_id bigint REFERENCES environment(id) ON DELETE CASCADE;
CREATE INDEX environment_origin ON environment (origin_environment_id) WHERE origin_environment_id IS NOT NULL;

-- settings update: the SDK's user model has a phone and a company beside name, locale and timezone
ALTER TABLE machine_account ADD COLUMN phone text;
ALTER TABLE machine_account ADD COLUMN company text;

-- settings feedback: what an account told the operator, kept whether or not a mail could carry it
CREATE TABLE feedback (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  account_id     bigint REFERENCES machine_account(id) ON DELETE SET NULL,
  theme          text,
  feedback       text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX feedback_created ON feedback (created_at, id);

ALTER TABLE notification DROP CONSTRAINT notification_kind_check;
ALTER TABLE notification ADD CONSTRAINT notification_kind_check CHECK (kind IN ('issue', 'issueDigest', 'supplierAlert', 'command', 'feedback'));
