"""Client subcommands of the `cronlog` CLI: the gRPC API from a shell."""

from __future__ import annotations

import argparse
import json
import uuid
from datetime import datetime

import grpc
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc


def add_client_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    jobs = sub.add_parser("jobs", help="create, get and list jobs").add_subparsers(
        dest="action", required=True)
    create = jobs.add_parser("create", help="register a job")
    create.add_argument("--name", required=True)
    create.add_argument("--tenant", required=True)
    create.add_argument("--handler", required=True)
    create.add_argument("--queue", default="default")
    create.add_argument("--payload", default="", help="handler input (UTF-8 text)")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="5 fields, 6 with seconds first, or @hourly etc.")
    when.add_argument("--at", help="ISO-8601 instant of a one-off job, with its offset")
    create.add_argument("--time-zone", default="UTC")
    create.add_argument("--timeout-seconds", type=float)
    create.add_argument("--max-attempts", type=int)
    create.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    create.add_argument("--request-id", help="defaults to a new UUID")
    get = jobs.add_parser("get", help="show one job")
    get.add_argument("job_id")
    for action in ("pause", "resume", "delete", "trigger"):
        change = jobs.add_parser(action, help=f"{action} a job")
        change.add_argument("job_id")
        change.add_argument("--request-id", help="defaults to a new UUID")
    lst = jobs.add_parser("list", help="list jobs")
    lst.add_argument("--tenant", default="")
    lst.add_argument("--page-size", type=int, default=100)

    runs = sub.add_parser("runs", help="run history").add_subparsers(dest="action", required=True)
    rlist = runs.add_parser("list", help="list runs, newest first")
    rlist.add_argument("--job", default="")
    rlist.add_argument("--tenant", default="")
    rlist.add_argument("--status", default="", choices=["", "scheduled", "running", "succeeded",
                                                        "failed", "dead_lettered", "missed"])
    rlist.add_argument("--page-size", type=int, default=20)
    rget = runs.add_parser("get", help="show one run with its attempts")
    rget.add_argument("run_id")

    prev = sub.add_parser("preview", help="fire times of a cron expression")
    prev.add_argument("cron")
    prev.add_argument("--time-zone", default="UTC")
    prev.add_argument("--count", type=int, default=10)
    prev.add_argument("--after", help="ISO-8601 instant (default now)")


def _print(message: Message) -> None:
    print(json.dumps(MessageToDict(message, preserving_proto_field_name=True),
                     indent=2, sort_keys=True))


def _create_request(args: argparse.Namespace) -> pb.CreateJobRequest:
    spec = pb.JobSpec(name=args.name, tenant=args.tenant, handler=args.handler, queue=args.queue,
                      payload=args.payload.encode(), time_zone=args.time_zone)
    if args.cron:
        spec.cron = args.cron
    else:
        spec.at.FromDatetime(datetime.fromisoformat(args.at))
    if args.timeout_seconds is not None:
        spec.timeout.FromMilliseconds(int(args.timeout_seconds * 1000))
    if args.max_attempts is not None:
        spec.retry_policy.max_attempts = args.max_attempts
    for label in args.label:
        key, _, value = label.partition("=")
        spec.labels[key] = value
    return pb.CreateJobRequest(request_id=args.request_id or str(uuid.uuid4()), spec=spec)


def run_client(args: argparse.Namespace) -> int:
    with grpc.insecure_channel(args.address) as channel:
        stub = pb_grpc.JobServiceStub(channel)
        try:
            if args.command == "jobs" and args.action == "create":
                _print(stub.CreateJob(_create_request(args), timeout=30))
            elif args.command == "jobs" and args.action in ("pause", "resume", "delete"):
                request_id = args.request_id or str(uuid.uuid4())
                if args.action == "pause":
                    _print(stub.PauseJob(pb.PauseJobRequest(
                        request_id=request_id, job_id=args.job_id), timeout=30))
                elif args.action == "resume":
                    _print(stub.ResumeJob(pb.ResumeJobRequest(
                        request_id=request_id, job_id=args.job_id), timeout=30))
                else:
                    _print(stub.DeleteJob(pb.DeleteJobRequest(
                        request_id=request_id, job_id=args.job_id), timeout=30))
            elif args.command == "jobs" and args.action == "trigger":
                _print(stub.TriggerJob(pb.TriggerJobRequest(
                    request_id=args.request_id or str(uuid.uuid4()), job_id=args.job_id),
                    timeout=30))
            elif args.command == "jobs" and args.action == "get":
                _print(stub.GetJob(pb.GetJobRequest(job_id=args.job_id), timeout=10))
            elif args.command == "jobs":
                _print(stub.ListJobs(pb.ListJobsRequest(tenant=args.tenant,
                                                        page_size=args.page_size), timeout=10))
            elif args.command == "runs" and args.action == "get":
                _print(stub.GetRun(pb.GetRunRequest(run_id=args.run_id), timeout=10))
            elif args.command == "runs":
                status = pb.RunStatus.Value(f"RUN_STATUS_{args.status.upper()}") \
                    if args.status else pb.RUN_STATUS_UNSPECIFIED
                _print(stub.ListRuns(pb.ListRunsRequest(job_id=args.job, tenant=args.tenant,
                                                        status=status,
                                                        page_size=args.page_size), timeout=10))
            elif args.command == "preview":
                request = pb.PreviewScheduleRequest(cron=args.cron, time_zone=args.time_zone,
                                                    count=args.count)
                if args.after:
                    request.after.FromDatetime(datetime.fromisoformat(args.after))
                _print(stub.PreviewSchedule(request, timeout=10))
        except grpc.RpcError as exc:
            print(f"error: {exc.code().name}: {exc.details()}")
            return 1
    return 0
