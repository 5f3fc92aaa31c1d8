"""The console's guard against saving an edit form over a job changed since the form was
filled: a digest of the job's spec, carried by the form, compared with the spec read just
before the update.

Why not the job's version: today it moves with every fire, so an every-second job would
refuse every form. When versions move only with spec and status changes (issue 35, item 7),
the console sends the version the form was filled at as expected_version, and this module
goes."""

from __future__ import annotations

import hashlib

from cronlog.console.ports import ApiRefused
from cronlog.v1 import job_service_pb2 as pb


def spec_fingerprint(spec: pb.JobSpec) -> str:
    """32 hex digits of the spec's deterministic encoding: equal for equal specs."""
    return hashlib.sha256(spec.SerializeToString(deterministic=True)).hexdigest()[:32]


def check_unchanged(job_id: str, filled_from: str, current: pb.JobSpec) -> None:
    """Refuses (FAILED_PRECONDITION, field spec_fingerprint) when the job's spec is no longer
    the one the form was filled from."""
    if filled_from != spec_fingerprint(current):
        raise ApiRefused("FAILED_PRECONDITION", f"job {job_id} was changed since the form "
                         "was filled: look at it again", "spec_fingerprint")
