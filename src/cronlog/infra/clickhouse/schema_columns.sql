-- Columns added to the history tables after their first release, for databases created
-- before them: ClickHouseRunHistory.ensure_schema runs each statement whose column its
-- table lacks (ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS). Each column is in its
-- table's CREATE TABLE in schema.sql too, with the same type and default, so an old
-- database brought up to date and a new one have the same tables. One column a statement.

-- Dependencies (issue 16).
ALTER TABLE {db}.runs ADD COLUMN logical_time DateTime DEFAULT scheduled_at;
ALTER TABLE {db}.runs ADD COLUMN logical_time_us Int64 DEFAULT scheduled_at_us;
ALTER TABLE {db}.runs ADD COLUMN cascade Nullable(String);
ALTER TABLE {db}.runs ADD COLUMN upstream_run_ids Array(String);
ALTER TABLE {db}.runs ADD COLUMN depth UInt32;
ALTER TABLE {db}.jobs ADD COLUMN after_job_ids Array(String);
ALTER TABLE {db}.jobs ADD COLUMN after_condition String;
ALTER TABLE {db}.jobs ADD COLUMN wait_window_ms Int64;
ALTER TABLE {db}.jobs ADD COLUMN dependent_job_ids Array(String);

-- Interval schedules (issue 20).
ALTER TABLE {db}.jobs ADD COLUMN schedule_kind String DEFAULT multiIf(cron != '', 'cron', at_us != 0, 'at', notEmpty(after_job_ids), 'after', '');
ALTER TABLE {db}.jobs ADD COLUMN every_ms UInt64;

-- An attempt's last progress (issue 36).
ALTER TABLE {db}.runs ADD COLUMN progress String;
ALTER TABLE {db}.runs ADD COLUMN progress_at_us Int64;
