-- cronlog's Postgres projection: job state, the due index and in-flight runs.
-- Every row carries its inbox partition: it is the shard key beyond one machine and the
-- unit of ownership and fencing.

CREATE TABLE IF NOT EXISTS partition_owners (
    partition          integer PRIMARY KEY,
    epoch              bigint  NOT NULL DEFAULT 0,
    owner              text,
    -- Next offsets of the event topics' partition that the projection has not applied yet.
    job_events_offset  bigint  NOT NULL DEFAULT 0,
    run_events_offset  bigint  NOT NULL DEFAULT 0,
    taken_at           timestamptz
);
-- The scheduler group member that caught up at the current epoch; NULL while the owner
-- that took it is still catching up. The api is ready when every partition's member in the
-- group is the one named here.
ALTER TABLE partition_owners ADD COLUMN IF NOT EXISTS caught_up_member text;

CREATE TABLE IF NOT EXISTS jobs (
    job_id         uuid PRIMARY KEY,
    partition      integer     NOT NULL,
    tenant         text        NOT NULL,
    name           text        NOT NULL,
    status         text        NOT NULL,
    version        bigint      NOT NULL,
    spec           bytea       NOT NULL,
    next_fire_at   timestamptz,
    last_fired_at  timestamptz,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);

-- The due index: the owner cycle asks for active jobs of its partitions due before a horizon.
-- The job's version as users see it: the version of the event that last changed its spec
-- or status (Job.revision, issue 35). NULL in rows written before it; read as the version.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS revision bigint;

-- The version of the event the job's spec is from: its JobCreated, JobUpdated or
-- JobRestored (issue 38). NULL in rows written before it.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS spec_version bigint;

-- The specs a job had before its current one (issue 38, RestoreJob): when an update or a
-- restore replaces a job's spec, the one replaced is kept here, by the version of the
-- event it came from. A spec replaced before this table (or while its row had no
-- spec_version) is not here; `cronlog replay --rebuild` fills it from the log.
CREATE TABLE IF NOT EXISTS job_specs (
    job_id        uuid        NOT NULL,
    spec_version  bigint      NOT NULL,
    spec          bytea       NOT NULL,
    replaced_at   timestamptz NOT NULL,
    PRIMARY KEY (job_id, spec_version)
);

CREATE INDEX IF NOT EXISTS jobs_due
    ON jobs (partition, next_fire_at)
    WHERE status = 'active' AND next_fire_at IS NOT NULL;

CREATE INDEX IF NOT EXISTS jobs_by_tenant ON jobs (tenant, created_at, job_id);

CREATE TABLE IF NOT EXISTS runs (
    run_id          uuid PRIMARY KEY,
    job_id          uuid        NOT NULL,
    partition       integer     NOT NULL,
    scheduled_at    timestamptz NOT NULL,
    status          text        NOT NULL,
    attempt         integer     NOT NULL,
    attempt_status  text        NOT NULL,
    version         bigint      NOT NULL,
    not_before      timestamptz NOT NULL,
    state           bytea       NOT NULL,
    updated_at      timestamptz NOT NULL,
    -- schedule, manual or backfill: only scheduled runs are one per fire time.
    trigger         text        NOT NULL DEFAULT 'schedule',
    -- The last attempt before the run was re-driven (issue 37): its retries count from it.
    attempt_base    integer     NOT NULL DEFAULT 0
);

-- Databases made before runs had a trigger: add it, and narrow the fire-time constraint.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS trigger text NOT NULL DEFAULT 'schedule';
ALTER TABLE runs ADD COLUMN IF NOT EXISTS attempt_base integer NOT NULL DEFAULT 0;
ALTER TABLE runs DROP CONSTRAINT IF EXISTS one_run_per_fire_time;

-- Invariant 4: one run per fire time. A second RunScheduled for the same fire time is a
-- double fire and must stop the projection rather than pass unnoticed. Manual runs and
-- backfills re-run fire times on purpose and carry their own ids.
CREATE UNIQUE INDEX IF NOT EXISTS one_scheduled_run_per_fire_time
    ON runs (job_id, scheduled_at) WHERE trigger = 'schedule';

-- The overlap policy asks for a job's unfinished runs.
CREATE INDEX IF NOT EXISTS runs_unfinished_by_job
    ON runs (job_id) WHERE status IN ('scheduled', 'running');

CREATE INDEX IF NOT EXISTS runs_in_flight
    ON runs (partition, not_before)
    WHERE status IN ('scheduled', 'running');

-- RedriveDeadLetters (issue 37) reads dead letters by fire time, of one job or of a tenant
-- (job_queries.DEAD_LETTERS): dead letters are few next to runs, so these stay small.
CREATE INDEX IF NOT EXISTS runs_dead_lettered_by_job
    ON runs (job_id, scheduled_at, run_id) WHERE status = 'dead_lettered';
CREATE INDEX IF NOT EXISTS runs_dead_lettered
    ON runs (scheduled_at, run_id) WHERE status = 'dead_lettered';

-- Request ids taken, per job (a job has one tenant), with the command and a digest of its
-- body: a retried command gets its first outcome, the same id with another request on the
-- job is refused. command and request_digest are NULL for ids recorded from job events
-- only (logs older than JobRequestApplied).
CREATE TABLE IF NOT EXISTS requests (
    job_id          uuid    NOT NULL,
    request_id      text    NOT NULL,
    partition       integer NOT NULL,
    job_version     bigint  NOT NULL,
    command         text,
    request_digest  text,
    PRIMARY KEY (job_id, request_id)
);

-- Databases made when request ids were global: the table was keyed by request_id alone,
-- which let one tenant's id answer for another's command. Re-key it (CREATE IF NOT EXISTS
-- above leaves an existing table as it is). No two old rows can share (job_id, request_id).
ALTER TABLE requests ADD COLUMN IF NOT EXISTS command text;
ALTER TABLE requests ADD COLUMN IF NOT EXISTS request_digest text;
DO $$
DECLARE
    old_key name;
BEGIN
    SELECT c.conname INTO old_key FROM pg_constraint c
    WHERE c.conrelid = 'requests'::regclass AND c.contype = 'p'
      AND array_length(c.conkey, 1) = 1;
    IF old_key IS NOT NULL THEN
        EXECUTE 'ALTER TABLE requests DROP CONSTRAINT ' || quote_ident(old_key);
        ALTER TABLE requests ADD PRIMARY KEY (job_id, request_id);
    END IF;
END
$$;

-- Dependencies (issue 16, docs/dependencies.md). An upstream job's dependents: its owner
-- sends each of them the end of every run of its chain.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS dependents uuid[] NOT NULL DEFAULT '{}';

-- A dependent job's fan-in: upstream ends recorded as waiting for the others of their
-- logical time (JobUpstreamRecorded, folded 'waiting'), until the logical time settles.
CREATE TABLE IF NOT EXISTS dependency_ends (
    job_id           uuid        NOT NULL,
    partition        integer     NOT NULL,
    logical_time     timestamptz NOT NULL,
    cascade          text        NOT NULL,
    upstream_job_id  uuid        NOT NULL,
    upstream_run_id  uuid        NOT NULL,
    status           text        NOT NULL,
    depth            integer     NOT NULL,
    opened_at        timestamptz NOT NULL,
    PRIMARY KEY (job_id, logical_time, cascade, upstream_job_id)
);
-- A new owner arms the wait-window timers of its partitions' waiting logical times.
CREATE INDEX IF NOT EXISTS dependency_ends_by_partition ON dependency_ends (partition);

-- Logical times settled (a dependent run decided, recorded missed, or closed by an end
-- that did not meet the condition), kept a while to tell a late or duplicate end from a
-- new one (at least the longest wait window).
CREATE TABLE IF NOT EXISTS dependency_settled (
    job_id            uuid        NOT NULL,
    partition         integer     NOT NULL,
    logical_time      timestamptz NOT NULL,
    cascade           text        NOT NULL,
    settled_at        timestamptz NOT NULL,
    upstream_run_ids  uuid[]      NOT NULL,
    PRIMARY KEY (job_id, logical_time, cascade)
);

-- ListJobs' filters (issue 18): what a job is listed by, kept apart from jobs so that a
-- fire, which updates jobs and every index on it (next_fire_at is in the due index, so
-- those updates are never HOT), writes none of these indexes; only creations, updates and
-- status changes write here, in the same transaction as jobs. Filled from the specs of
-- jobs older than this table by ensure_schema (job_listing.fill_missing).
CREATE TABLE IF NOT EXISTS job_listing (
    job_id      uuid PRIMARY KEY,
    tenant      text        NOT NULL,
    created_at  timestamptz NOT NULL,
    status      text        NOT NULL,
    name        text        NOT NULL,
    queue       text        NOT NULL,
    labels      jsonb       NOT NULL
);
-- A filtered page walks a tenant's jobs in page order (keyset on created_at, job_id) and
-- stops at the page size; a rare status or queue is found without the walk.
CREATE INDEX IF NOT EXISTS job_listing_by_tenant
    ON job_listing (tenant, created_at, job_id);
CREATE INDEX IF NOT EXISTS job_listing_by_queue
    ON job_listing (tenant, queue, created_at, job_id);
CREATE INDEX IF NOT EXISTS job_listing_by_status
    ON job_listing (tenant, status, created_at, job_id);
-- Label selectors: labels @> '{"key": "value"}' and labels ? 'key' (jsonb_ops).
CREATE INDEX IF NOT EXISTS job_listing_by_labels ON job_listing USING gin (labels);

-- Calendars (issue 20, docs/calendars.md): a tenant's named excluded days, projected from
-- CalendarCreated/Updated (on the job-events topic, keyed by the calendar id) by the owner
-- of the calendar's partition. The api reads it, never writes it. exclusions: a JSON list
-- of "YYYY-MM-DD" or "YYYY-MM-DD..YYYY-MM-DD" (Exclusions.texts()).
CREATE TABLE IF NOT EXISTS calendars (
    tenant       text        NOT NULL,
    name         text        NOT NULL,
    calendar_id  uuid        NOT NULL UNIQUE,
    partition    integer     NOT NULL,
    version      bigint      NOT NULL,
    description  text        NOT NULL,
    exclusions   jsonb       NOT NULL,
    -- How many jobs follow it (calendar_subscribers).
    subscribers  integer     NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant, name)
);
-- The jobs an update is published to (CalendarJobSubscribed/Unsubscribed).
CREATE TABLE IF NOT EXISTS calendar_subscribers (
    calendar_id  uuid    NOT NULL,
    job_id       uuid    NOT NULL,
    partition    integer NOT NULL,
    PRIMARY KEY (calendar_id, job_id)
);
-- The calendar a job follows as last published to it (JobCalendarApplied):
-- {"name", "version", "found", "exclusions": [texts]}; NULL when the spec names none.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS calendar jsonb;
-- Calendar updates reach their followers by reference (issue 33, commands/
-- calendar_followers.py): a new owner reads its partitions' jobs behind their calendar's row
-- (jobs_following), and every owner now and then those of calendars applied recently, by
-- the database's clock (applied_at: the event's own time may be long before a catch-up).
ALTER TABLE calendars ADD COLUMN IF NOT EXISTS applied_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX IF NOT EXISTS calendars_by_applied_at ON calendars (applied_at);
CREATE INDEX IF NOT EXISTS jobs_following ON jobs (partition) WHERE calendar IS NOT NULL;

-- Alert channels (issue 37, docs/alerts.md "Channels"): where a tenant's alerts are
-- delivered, projected from ChannelCreated/Updated/SecretRotated/Deleted (on the job-events
-- topic, keyed by the channel id) by the owner of the channel's partition, and by catch-up
-- and replay alike. The api reads it, never writes it. No secret is stored: a webhook's
-- signing secret derives from the operator's key, channel_id and secret_rotation.
-- A deleted channel keeps its row (deleted): its name stays taken.
CREATE TABLE IF NOT EXISTS channels (
    channel_id       uuid        PRIMARY KEY,
    partition        integer     NOT NULL,
    tenant           text        NOT NULL,
    name             text        NOT NULL,
    kind             text        NOT NULL,
    target           text        NOT NULL,
    recipients       text[]      NOT NULL,
    description      text        NOT NULL,
    is_default       boolean     NOT NULL,
    secret_rotation  bigint      NOT NULL,
    version          bigint      NOT NULL,
    deleted          boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    UNIQUE (tenant, name)
);
