-- Every mail the service sends (issue notifications, supplier alerts, command mails) and what became of it:
-- queued until the mail queue's worker hands it to SMTP_URL; sent; failed when the server refused it for
-- good (5xx, its reply kept in `reason`) or no address is left to send to. Retries of a server that is away
-- keep it queued (attempts counts them), never failed: an outage delays mail, it never drops it.
CREATE TABLE notification (
  id             bigserial PRIMARY KEY,
  hash_id        text NOT NULL UNIQUE,
  environment_id bigint REFERENCES environment(id) ON DELETE CASCADE,
  account_id     bigint REFERENCES machine_account(id) ON DELETE SET NULL,
  kind           text NOT NULL CHECK (kind IN ('issue', 'issueDigest', 'supplierAlert', 'command')),
  recipients     text[] NOT NULL,
  subject        text NOT NULL,
  body           text NOT NULL,
  state          text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'sent', 'failed')),
  reason         text,
  attempts       integer NOT NULL DEFAULT 0,
  created_at     timestamptz NOT NULL DEFAULT now(),
  sent_at        timestamptz,
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notification_env ON notification (environment_id, id);
