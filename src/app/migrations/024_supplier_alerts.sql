-- Subscriptions with failures counted but not yet mailed: the alert scan finds those whose quiet interval has ended.
CREATE INDEX supplier_subscription_pending ON supplier_subscription (last_notification) WHERE alerts_since_last_notification > 0;
