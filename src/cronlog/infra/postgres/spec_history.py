"""PostgresSpecHistory: the spec a job had at a version of its own (RestoreJob, issue 38),
from its row's current spec and the job_specs table of those replaced."""

from __future__ import annotations

from uuid import UUID

import psycopg
from psycopg_pool import ConnectionPool

from cronlog.domain.catalogue import SPEC_EVENTS
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec, CodecError
from cronlog.infra.avro.event_mapping import spec_from_record
from cronlog.infra.postgres.byte_pages import configure_reads
from cronlog.infra.postgres.connection import StateStoreError
from cronlog.infra.postgres.spec_history_sql import CURRENT_SPEC, REPLACED_SPEC_AT


class CorruptSpecHistory(StateStoreError):
    """A kept spec that does not decode to a spec event."""


class PostgresSpecHistory:
    def __init__(self, dsn: str, codec: AvroCodec | None = None) -> None:
        # Two statements of one row each per restore: a small pool, each statement bounded
        # in time as every api read is (byte_pages.configure_reads).
        self._pool = ConnectionPool(dsn, min_size=0, max_size=2, open=True,
                                    configure=configure_reads)
        self._codec = codec or AvroCodec()

    def close(self) -> None:
        self._pool.close()

    def spec_at(self, job_id: UUID, version: int) -> JobSpec | None:
        """The spec in force at the job's `version`; None when the job has none kept that
        far back (or no row)."""
        params = {"job_id": job_id, "version": version}
        try:
            with self._pool.connection() as conn:
                current = conn.execute(CURRENT_SPEC, params).fetchone()
                if current is None:
                    return None
                raw = bytes(current[0])
                spec_version = current[1]
                if spec_version is None:  # a row from before spec_version: its event says
                    spec_version = int(self._decode(job_id, raw)[1])
                if spec_version <= version:
                    return self._decode(job_id, raw)[0]
                older = conn.execute(REPLACED_SPEC_AT, params).fetchone()
        except psycopg.Error as exc:
            raise StateStoreError(f"reading the spec of job {job_id} at version {version}: "
                                  f"{exc}") from exc
        return None if older is None else self._decode(job_id, bytes(older[0]))[0]

    def _decode(self, job_id: UUID, raw: bytes) -> tuple[JobSpec, int]:
        try:
            name, record = self._codec.decode(raw)
        except CodecError as exc:
            raise CorruptSpecHistory(f"job {job_id}: a kept spec does not decode: {exc}") \
                from exc
        if name not in SPEC_EVENTS:
            raise CorruptSpecHistory(f"job {job_id}: a kept spec is a {name}")
        return spec_from_record(record["spec"]), int(record["version"])
