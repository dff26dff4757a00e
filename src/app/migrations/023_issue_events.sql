-- Issue notifications read what happened to issues from this outbox: a row per issue opened (or reopened),
-- raised to a higher level, closed, or commented on by someone. Triggers write it in the same transaction
-- as the change, whichever path made it (threshold evaluation, the connectivity check, the REST API), and
-- the notifier (src/notifications/issue-notifier.ts) takes and deletes the rows. On the report path an
-- open issue's update costs only the trigger's WHEN test: no row unless the level rose or it closed.
CREATE TABLE issue_event (
  id         bigserial PRIMARY KEY,
  issue_id   bigint NOT NULL REFERENCES issue(id) ON DELETE CASCADE,
  kind       text NOT NULL CHECK (kind IN ('opened', 'raised', 'closed', 'comment')),
  level      smallint NOT NULL,
  comment_id bigint REFERENCES issue_comment(id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION issue_event_of_issue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO issue_event (issue_id, kind, level) VALUES (NEW.id, 'opened', NEW.level);
    IF NEW.closed_at IS NOT NULL THEN
      INSERT INTO issue_event (issue_id, kind, level) VALUES (NEW.id, 'closed', NEW.level);
    END IF;
  ELSIF OLD.closed_at IS NOT NULL AND NEW.closed_at IS NULL THEN
    INSERT INTO issue_event (issue_id, kind, level) VALUES (NEW.id, 'opened', NEW.level);
  ELSE
    IF NEW.level > OLD.level THEN
      INSERT INTO issue_event (issue_id, kind, level) VALUES (NEW.id, 'raised', NEW.level);
    END IF;
    IF OLD.closed_at IS NULL AND NEW.closed_at IS NOT NULL THEN
      INSERT INTO issue_event (issue_id, kind, level) VALUES (NEW.id, 'closed', NEW.level);
    END IF;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER issue_event_insert AFTER INSERT ON issue
  FOR EACH ROW WHEN (NEW.deleted_at IS NULL) EXECUTE FUNCTION issue_event_of_issue();
CREATE TRIGGER issue_event_update AFTER UPDATE OF level, closed_at ON issue
  FOR EACH ROW WHEN (NEW.deleted_at IS NULL AND (NEW.level > OLD.level OR (OLD.closed_at IS NULL) <> (NEW.closed_at IS NULL)))
  EXECUTE FUNCTION issue_event_of_issue();

-- comments by an account only: the automatic ones ("Closed automatically ...") come with the close
CREATE FUNCTION issue_event_of_comment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO issue_event (issue_id, kind, level, comment_id) SELECT NEW.issue_id, 'comment', i.level, NEW.id FROM issue i WHERE i.id = NEW.issue_id;
  RETURN NULL;
END $$;
CREATE TRIGGER issue_event_comment AFTER INSERT ON issue_comment
  FOR EACH ROW WHEN (NEW.account_id IS NOT NULL) EXECUTE FUNCTION issue_event_of_comment();

-- A recipient's issue mails: the last one sent, and what waits for the digest at the end of the window.
CREATE TABLE issue_mail_recipient (
  account_id   bigint PRIMARY KEY REFERENCES machine_account(id) ON DELETE CASCADE,
  last_mail_at timestamptz NOT NULL
);
CREATE TABLE issue_mail_pending (
  id             bigserial PRIMARY KEY,
  account_id     bigint NOT NULL REFERENCES machine_account(id) ON DELETE CASCADE,
  environment_id bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  subject        text NOT NULL,
  body           text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX issue_mail_pending_account ON issue_mail_pending (account_id, id);
