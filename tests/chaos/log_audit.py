"""The log audit lives in cronlog_dev.bench.log_audit, where the bench's failover workload
uses it too; re-exported for the chaos tests."""

from cronlog_dev.bench.log_audit import TERMINAL_ATTEMPT, TERMINAL_RUN, LogAudit, audit

__all__ = ["TERMINAL_ATTEMPT", "TERMINAL_RUN", "LogAudit", "audit"]
