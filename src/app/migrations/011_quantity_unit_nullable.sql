-- A quantity may have no unit (Api-Version 8 and the seed's quantity add leave it out); older
-- Api-Versions are answered with a placeholder (src/http/versions.ts).
ALTER TABLE quantity ALTER COLUMN unit DROP NOT NULL;
