"""Where a job is in its lifecycle (JobStatus on the api, `jobs.status` in PostgreSQL)."""

ACTIVE = "active"
PAUSED = "paused"
COMPLETED = "completed"
DELETED = "deleted"
