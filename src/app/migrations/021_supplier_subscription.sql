-- A user's subscription to failures of a supplier object's code (the SDK's userSubscription). Failures after
-- the last mail count in alerts_since_last_notification and are summed up in the next mail, sent no sooner
-- than NOTIFICATION_ALERT_QUIET_SECONDS after last_notification.
CREATE TABLE supplier_subscription (
  id                             bigserial PRIMARY KEY,
  hash_id                        text NOT NULL UNIQUE,
  environment_id                 bigint NOT NULL REFERENCES environment(id) ON DELETE CASCADE,
  user_id                        bigint NOT NULL REFERENCES machine_account(id) ON DELETE CASCADE,
  object_type                    text NOT NULL CHECK (object_type IN ('deviceType', 'supplierReportType', 'supplierWebhook', 'supplierCertificate')),
  object_id                      bigint NOT NULL,
  created_at                     timestamptz NOT NULL DEFAULT now(),
  last_notification              timestamptz,
  alerts_since_last_notification integer NOT NULL DEFAULT 0,
  UNIQUE (object_type, object_id, user_id)
);
CREATE INDEX supplier_subscription_env ON supplier_subscription (environment_id, id);
CREATE INDEX supplier_subscription_user ON supplier_subscription (user_id);
