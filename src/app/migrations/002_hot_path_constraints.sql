-- The rows every device report writes (a condition report, its measurements, an activity) carry
-- no foreign keys: each would cost a lookup per row on the hottest path. Integrity comes from the
-- one statement that writes them (it joins environment, device, report type and quantity, so a
-- row only lands when they exist); deleting an environment or a device deletes or keeps these
-- rows explicitly. Measurements are never looked up by hashId, so that column needs no index.
ALTER TABLE measurement DROP CONSTRAINT measurement_report_id_fkey;
ALTER TABLE measurement DROP CONSTRAINT measurement_environment_id_fkey;
ALTER TABLE measurement DROP CONSTRAINT measurement_device_id_fkey;
ALTER TABLE measurement DROP CONSTRAINT measurement_quantity_id_fkey;
ALTER TABLE measurement DROP CONSTRAINT measurement_hash_id_key;
DROP INDEX measurement_device_time;

ALTER TABLE condition_report DROP CONSTRAINT condition_report_environment_id_fkey;
ALTER TABLE condition_report DROP CONSTRAINT condition_report_device_id_fkey;
ALTER TABLE condition_report DROP CONSTRAINT condition_report_report_type_id_fkey;

ALTER TABLE supplier_activity DROP CONSTRAINT supplier_activity_environment_id_fkey;
ALTER TABLE supplier_activity DROP CONSTRAINT supplier_activity_device_id_fkey;
ALTER TABLE supplier_activity DROP CONSTRAINT supplier_activity_device_type_id_fkey;
