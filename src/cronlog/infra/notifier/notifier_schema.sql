-- The notifier's own state (issue 37, docs/alerts.md): every delivery until it is delivered
-- or given up, by the alerts-topic partition its alert was read from (whoever reads that
-- partition carries on with it), and the jobs whose runs are failing (for `recovered`).

CREATE TABLE IF NOT EXISTS notifier_deliveries (
    delivery_id  uuid PRIMARY KEY,
    partition    integer     NOT NULL,
    tenant       text        NOT NULL,
    channel_id   uuid        NOT NULL,
    -- The alert as delivered (AlertMessage's fields), JSON.
    alert        jsonb       NOT NULL,
    -- The number of the next attempt, and when it is due.
    attempt      integer     NOT NULL,
    due_at       timestamptz NOT NULL,
    first_at     timestamptz,
    -- pending, delivered or failed (given up).
    status       text        NOT NULL,
    updated_at   timestamptz NOT NULL
);

-- A notifier taking a partition loads its pending deliveries, earliest due first.
CREATE INDEX IF NOT EXISTS notifier_deliveries_pending
    ON notifier_deliveries (partition, due_at) WHERE status = 'pending';

-- Ended deliveries are pruned after a while (their attempts are in ClickHouse).
CREATE INDEX IF NOT EXISTS notifier_deliveries_ended
    ON notifier_deliveries (updated_at) WHERE status <> 'pending';

CREATE TABLE IF NOT EXISTS notifier_failing_jobs (
    job_id  uuid PRIMARY KEY,
    since   timestamptz NOT NULL
);
