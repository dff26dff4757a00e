-- A supplier report type's name is a stringOrTranslations, as the SDK's report type add sends it
-- (plain text up to Api-Version 6, src/http/versions.ts); name_text is its display text for
-- sorting and search, as on quantities, device types and command types.
ALTER TABLE report_type ADD COLUMN name_text text;
UPDATE report_type SET name_text = name;
ALTER TABLE report_type ALTER COLUMN name_text SET NOT NULL;
ALTER TABLE report_type ALTER COLUMN name TYPE jsonb USING to_jsonb(name);
