"""`cronlog verify` (issue 38): the scheduler's guarantees proved from its own event log,
for any tenant and window (docs/verify.md). Pure: the caller reads the log."""
