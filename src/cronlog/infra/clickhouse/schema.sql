-- cronlog run history. Valid on ClickHouse 18.16 (Debian) and on current engines.
-- Times are DateTime (seconds, for partitioning) plus Int64 microseconds (for precision),
-- because DateTime64 does not exist on 18.16. 0 means "not yet".

CREATE DATABASE IF NOT EXISTS {db};

-- One row per attempt, latest state. The projector rewrites every attempt row of a run
-- when the run changes, with the run's event version; ReplacingMergeTree keeps the newest,
-- so redelivered events change nothing.
CREATE TABLE IF NOT EXISTS {db}.runs
(
    scheduled_at       DateTime,
    scheduled_at_us    Int64,
    tenant             String,
    job_id             String,
    run_id             String,
    attempt            UInt32,
    queue              String,
    handler            String,
    trigger            String,
    max_attempts       UInt32,
    run_status         String,
    attempt_status     String,
    not_before_us      Int64,
    dispatched_at_us   Int64,
    started_at_us      Int64,
    finished_at_us     Int64,
    start_lag_us       Int64,
    worker             String,
    output             String,
    output_truncated   UInt8,
    error              String,
    reason             String,
    version            UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(scheduled_at)
ORDER BY (tenant, job_id, scheduled_at, run_id, attempt);

-- Every run event, append-only; the same event delivered twice collapses on (run_id, version).
CREATE TABLE IF NOT EXISTS {db}.run_events
(
    at          DateTime,
    at_us       Int64,
    tenant      String,
    job_id      String,
    run_id      String,
    version     UInt64,
    event_type  String,
    attempt     UInt32,
    body        String
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(at)
ORDER BY (job_id, run_id, version);

-- One row per job, latest lifecycle state (fire-by-fire progress stays in Postgres).
-- Partitioned by creation day; retention never drops it: jobs outlive their runs' history.
CREATE TABLE IF NOT EXISTS {db}.jobs
(
    created_at     DateTime,
    tenant         String,
    job_id         String,
    name           String,
    queue          String,
    handler        String,
    cron           String,
    at_us          Int64,
    time_zone      String,
    status         String,
    label_keys     Array(String),
    label_values   Array(String),
    created_at_us  Int64,
    updated_at_us  Int64,
    version        UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(created_at)
ORDER BY (tenant, job_id);

-- One row per range of missed fire times (JobFireTimesMissed): every fire time of the job's
-- schedule from first to last, `count` of them, recorded and not run (misfire policy).
-- Partitioned by the day the range was recorded, so retention keeps it 90 days from then
-- (a range can begin long before, after a long pause). The same event redelivered writes
-- the same key and version into the same partition: ReplacingMergeTree keeps one.
CREATE TABLE IF NOT EXISTS {db}.missed_fire_times
(
    recorded_at     DateTime,
    recorded_at_us  Int64,
    tenant          String,
    job_id          String,
    first           DateTime,
    first_us        Int64,
    last            DateTime,
    last_us         Int64,
    count           UInt64,
    reason          String,
    version         UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(recorded_at)
ORDER BY (tenant, job_id, first_us);
