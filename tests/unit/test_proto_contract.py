"""The committed generated code matches proto/, and the service has every RPC."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cronlog.v1 import job_service_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
RPCS = {"CreateJob", "GetJob", "ListJobs", "UpdateJob", "PauseJob", "ResumeJob", "DeleteJob",
        "TriggerJob", "BackfillJob", "GetRun", "ListRuns", "CancelRun", "PreviewSchedule"}


def test_service_has_every_rpc() -> None:
    service = pb.DESCRIPTOR.services_by_name["JobService"]
    assert service.full_name == "cronlog.v1.JobService"
    assert set(service.methods_by_name) == RPCS


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    subprocess.run([str(ROOT / "scripts" / "gen_proto.sh"), str(tmp_path)], check=True,
                   capture_output=True)
    committed = ROOT / "src" / "cronlog" / "v1"
    generated = tmp_path / "cronlog" / "v1"
    names = sorted(p.name for p in generated.iterdir())
    assert names == sorted(p.name for p in committed.iterdir() if p.suffix in (".py", ".pyi"))
    for name in names:
        assert (generated / name).read_text() == (committed / name).read_text(), (
            f"{name} is stale: run `make proto`")
