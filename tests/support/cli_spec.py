"""A job's spec as `cronlog jobs create` or `jobs update` builds it from options."""

from __future__ import annotations

import argparse

from cronlog.cli.job_spec import job_spec
from cronlog.cli.parser import add_client_commands
from cronlog.v1 import job_service_pb2 as pb


def cli_spec(*options: str, base: pb.JobSpec | None = None) -> pb.JobSpec:
    """`jobs update` (on top of `base`, the job as read) when base is given, else `create`."""
    parser = argparse.ArgumentParser()
    add_client_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["jobs", "update" if base else "create", *options])
    return job_spec(args, base)
