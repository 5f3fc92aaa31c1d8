-- cronlog run history. Valid on ClickHouse 18.16 (Debian) and on current engines.
-- Times are DateTime (seconds, for partitioning) plus Int64 microseconds (for precision),
-- because DateTime64 does not exist on 18.16. 0 means "not yet".
-- A column added to a table after its first release is written here in its CREATE TABLE
-- and again in schema_columns.sql, which adds it to databases created before it (18.16 has
-- no ADD COLUMN IF NOT EXISTS, so the adapter adds only the columns a table lacks).

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
    version            UInt64,
    -- Dependencies (issue 16). Rows written before them read the run's own fire time as
    -- its logical time, NULL cascade (outside any chain), no upstream runs and depth 0.
    logical_time       DateTime DEFAULT scheduled_at,
    logical_time_us    Int64 DEFAULT scheduled_at_us,
    cascade            Nullable(String),
    upstream_run_ids   Array(String),
    depth              UInt32,
    -- An attempt's last progress (issue 36): its handler's heartbeat details, and when.
    progress           String,
    progress_at_us     Int64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(scheduled_at)
ORDER BY (tenant, job_id, scheduled_at, run_id, attempt);

-- Where each run's rows are in `runs`, by run id: the columns that lead runs' key. run_id is
-- not in that key, so a run asked for by id alone (GetRun, the projector reloading a run)
-- would read every row of runs; it reads a granule of this table per day partition, then
-- the few granules of runs that hold it. Written with the run's rows, before them, into
-- the same day partition (retention drops both together); its rows never change, and a
-- key written twice collapses. Small granules: a lookup reads one per partition.
CREATE TABLE IF NOT EXISTS {db}.run_keys
(
    scheduled_at  DateTime,
    run_id        String,
    tenant        String,
    job_id        String
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(scheduled_at)
ORDER BY run_id
SETTINGS index_granularity = 1024;

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
    version        UInt64,
    -- A dependent job's upstream jobs, its condition and wait window (issue 16); empty,
    -- '' and 0 for cron and one-off jobs.
    after_job_ids   Array(String),
    after_condition String,
    wait_window_ms  Int64,
    -- The jobs that run after this one.
    dependent_job_ids Array(String),
    -- The schedule's kind: cron, at, every (an interval job: cron '' and at_us 0, its
    -- interval in every_ms, 0 for the other kinds) or after. String, not LowCardinality,
    -- which 18.16 has only as an experimental type; four values compress to nearly nothing.
    -- Rows written before these columns read the kind their cron, at_us and after_job_ids
    -- show; an interval job's read '' and every_ms 0 until `cronlog replay --rebuild`.
    schedule_kind  String DEFAULT multiIf(cron != '', 'cron', at_us != 0, 'at',
                                          notEmpty(after_job_ids), 'after', ''),
    every_ms       UInt64
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

-- Dependency facts of a job's log (issue 16), one row per event: on an upstream job, the
-- dependents linked and unlinked (JobDependentLinked/Unlinked); on a dependent job, the
-- upstream ends that changed its fan-in (JobUpstreamRecorded: the logical time now waits
-- for other upstreams, is decided, or is closed) and the links its upstreams refused
-- (JobUpstreamUnavailable). Fields an event does not have are '' or 0. Partitioned by the
-- day it was recorded; each event has its own job version, so a redelivered one collapses.
CREATE TABLE IF NOT EXISTS {db}.dependency_events
(
    at               DateTime,
    at_us            Int64,
    tenant           String,
    job_id           String,
    version          UInt64,
    event_type       String,
    dependent_job_id String,
    upstream_job_id  String,
    upstream_run_id  String,
    upstream_status  String,
    logical_time     DateTime,
    logical_time_us  Int64,
    cascade          String,
    depth            UInt32,
    folded           String,
    opened_at_us     Int64,
    reason           String
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(at)
ORDER BY (tenant, job_id, version);

-- A job's own events, one row each, worded as `cronlog audit job` prints them (who: the
-- actor and request id; what: the audit's details, at most 500 characters): the index the
-- console's audit timeline reads (projections/job_timeline.py). Every job event but
-- JobFireAdvanced (one a fire: the runs tell those). Events carry no person, only the
-- request id. The same event redelivered writes the same row: the key ends with the event
-- type because a JobRequestApplied has its command's version. Partitioned by day and
-- dropped by retention with the rest of the history; a database created before it holds
-- the events projected since, and `cronlog replay --rebuild` fills it from the log.
CREATE TABLE IF NOT EXISTS {db}.job_events
(
    at          DateTime,
    at_us       Int64,
    tenant      String,
    job_id      String,
    version     UInt64,
    event_type  String,
    request_id  String,
    actor       String,
    summary     String
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(at)
ORDER BY (tenant, job_id, version, event_type);

-- Each attempt of each alert's delivery to a channel (issue 37), one row per
-- AlertDeliveryAttempted the notifier recorded on `<prefix>alert-deliveries`: what the
-- tenant sees with ListAlertDeliveries, `cronlog alerts list` and the console's job page.
-- run_id '' and run_attempt 0 for an alert about no run; next_attempt_at_us 0 unless the
-- outcome is `retrying`. The same record projected twice collapses (every column is in the
-- key or equal); an attempt the notifier recorded twice differs in its sent time only, so
-- readers take (delivery_id, attempt) as the key (LIMIT 1 BY). Partitioned by the day it
-- was sent and dropped by retention with the rest of the history. `cronlog replay
-- --rebuild` leaves it as it is (it is not rebuilt from the run events).
CREATE TABLE IF NOT EXISTS {db}.alert_deliveries
(
    sent_at             DateTime,
    sent_at_us          Int64,
    tenant              String,
    job_id              String,
    job_name            String,
    delivery_id         String,
    attempt             UInt32,
    alert_id            String,
    kind                String,
    run_id              String,
    run_attempt         UInt32,
    digest_count        UInt32,
    message             String,
    channel_id          String,
    channel_name        String,
    channel_kind        String,
    outcome             String,
    status_code         UInt32,
    latency_ms          Int64,
    error               String,
    next_attempt_at_us  Int64
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(sent_at)
ORDER BY (tenant, job_id, sent_at_us, delivery_id, attempt);
