-- Where an account's mail goes and how it reads: issue notifications and supplier alerts are written in the
-- account's locale and time zone. IF NOT EXISTS: the user routes may bring the same columns.
ALTER TABLE machine_account ADD COLUMN IF NOT EXISTS email text;
ALTER TABLE machine_account ADD COLUMN IF NOT EXISTS locale text;
ALTER TABLE machine_account ADD COLUMN IF NOT EXISTS timezone text;
