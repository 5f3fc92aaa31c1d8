"""The client commands run: each turns its options into CronlogClient calls and prints the
answer (stdout) or the api's refusal (stderr)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TypeVar

import grpc
from google.protobuf.message import Message

from cronlog.cli.alerts import alerts_command
from cronlog.cli.calendars import CalendarUsageError, calendars_command, preview_request_options
from cronlog.cli.channels import ChannelUsageError, channels_command
from cronlog.cli.dead_letters import dead_letters_command
from cronlog.cli.history import history_command
from cronlog.cli.importing import run_import
from cronlog.cli.job_filters import list_jobs_request
from cronlog.cli.job_spec import UsageError, duration, instant, job_spec, update_request
from cronlog.cli.output import render
from cronlog.cli.token import TokenError, caller_token
from cronlog.client import ApiError, CronlogClient, RunWaitTimeout, connect
from cronlog.v1 import job_service_pb2 as pb

# `cronlog runs wait`: the run ended without succeeding; it had not ended in time.
EXIT_RUN_NOT_SUCCEEDED = 3
EXIT_WAIT_TIMED_OUT = 4
# `channels test`: the test alert was sent, and not taken (the answer says why).
EXIT_NOT_DELIVERED = 1
# `cronlog history verify` found a violation (as `cronlog verify` exits).
EXIT_VIOLATED = 1


def _client(address: str, token: str | None) -> CronlogClient:
    ca_file = os.environ.get("CRONLOG_TLS_CA")
    try:
        return connect(address, token=token, ca_file=ca_file)
    except OSError as exc:
        raise UsageError(f"CRONLOG_TLS_CA: cannot read {ca_file!r}: {exc}") from None


def _jobs(client: CronlogClient, args: argparse.Namespace) -> Message:
    action = args.action
    if action == "create":
        return _warned(client.create_job_answer(job_spec(args), request_id=args.request_id))
    if action == "update":
        update = update_request(args, client.get_job(args.job_id))
        return _warned(client.update_job_answer(
            update.job_id, update.spec, expected_version=update.expected_version,
            request_id=update.request_id))
    if action == "pause":
        return pb.PauseJobResponse(job=client.pause_job(args.job_id, request_id=args.request_id))
    if action == "resume":
        return pb.ResumeJobResponse(job=client.resume_job(args.job_id,
                                                          request_id=args.request_id))
    if action == "delete":
        return pb.DeleteJobResponse(job=client.delete_job(args.job_id,
                                                          request_id=args.request_id))
    if action == "trigger":
        return pb.TriggerJobResponse(run=client.trigger_job(
            args.job_id, cascade=args.cascade, request_id=args.request_id))
    if action == "restore":
        return _warned(client.restore_job(args.job_id, args.version,
                                          skip_missed=args.skip_missed,
                                          request_id=args.request_id))
    if action == "backfill":
        return pb.BackfillJobResponse(run_ids=client.backfill_job(
            args.job_id, instant(args.after, "--from"), instant(args.until, "--until"),
            cascade=args.cascade, request_id=args.request_id))
    if action == "get":
        return pb.GetJobResponse(job=client.get_job(args.job_id))
    page = client.list_jobs(list_jobs_request(args))
    return pb.ListJobsResponse(jobs=page.items, next_page_token=page.next_page_token)


Warned = TypeVar("Warned", pb.CreateJobResponse, pb.UpdateJobResponse,
                 pb.RestoreJobResponse)


def _warned(answer: Warned) -> Warned:
    """The api's warnings, for people, on stderr too: the answer (stdout) keeps them for
    scripts."""
    for warning in answer.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return answer


def _workers(client: CronlogClient, args: argparse.Namespace) -> Message:
    return pb.ListWorkersResponse(workers=client.list_workers(args.queue))


def _runs(client: CronlogClient, args: argparse.Namespace) -> Message:
    if args.action == "wait":
        try:
            return pb.GetRunResponse(run=client.wait_for_run(args.run_id, args.timeout,
                                                             args.poll))
        except ValueError as exc:
            raise UsageError(f"--{exc}") from None
    if args.action == "get":
        return pb.GetRunResponse(run=client.get_run(args.run_id))
    if args.action == "cancel":
        return pb.CancelRunResponse(run=client.cancel_run(args.run_id,
                                                          request_id=args.request_id))
    if args.action == "redrive":
        return pb.RedriveRunResponse(run=client.redrive_run(args.run_id,
                                                            request_id=args.request_id))
    status = (pb.RunStatus.Value(f"RUN_STATUS_{args.status.upper()}") if args.status
              else pb.RUN_STATUS_UNSPECIFIED)
    request = pb.ListRunsRequest(job_id=args.job, tenant=args.tenant, status=status,
                                 page_size=args.page_size, page_token=args.page_token)
    if args.scheduled_after:
        request.scheduled_after.FromDatetime(instant(args.scheduled_after,
                                                     "--scheduled-after"))
    if args.scheduled_before:
        request.scheduled_before.FromDatetime(instant(args.scheduled_before,
                                                      "--scheduled-before"))
    page = client.list_runs(request)
    return pb.ListRunsResponse(runs=page.items, next_page_token=page.next_page_token)


def preview_request(args: argparse.Namespace) -> pb.PreviewScheduleRequest:
    if bool(args.cron) == bool(args.every):
        raise UsageError("preview: give a cron expression or --every, one of them")
    request = pb.PreviewScheduleRequest(cron=args.cron, time_zone=args.time_zone,
                                        count=args.count)
    if args.every:
        request.every.FromTimedelta(duration(args.every, "--every"))
    for option in ("after", "start_at", "end_at"):
        value = getattr(args, option)
        if value:
            getattr(request, option).FromDatetime(instant(value, "--" + option.replace("_", "-")))
    preview_request_options(args, request)
    return request


def _preview(client: CronlogClient, args: argparse.Namespace) -> Message:
    return client.preview_schedule(preview_request(args))


COMMANDS = {"jobs": _jobs, "runs": _runs, "preview": _preview, "calendars": calendars_command,
            "channels": channels_command, "workers": _workers,
            "dead-letters": dead_letters_command, "alerts": alerts_command,
            "history": history_command}


def run_client(args: argparse.Namespace) -> int:
    """Answers go to stdout; errors go to stderr alone, exit 2 for usage, 1 for the api."""
    # The caller's tenant token, when the api requires one (see docs/security.md).
    try:
        token = caller_token(os.environ)
    except TokenError as exc:
        print(f"cronlog: error: {exc}", file=sys.stderr)
        return 2
    prog = " ".join(["cronlog", args.command, getattr(args, "action", "")]).rstrip()
    try:
        with _client(args.address, token) as client:
            if args.command == "jobs" and args.action == "import":
                return run_import(args, client)
            answer = COMMANDS[args.command](client, args)
    except RunWaitTimeout as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        if exc.run is not None:
            print(render(pb.GetRunResponse(run=exc.run), args.output_format, None))
        return EXIT_WAIT_TIMED_OUT
    except (UsageError, CalendarUsageError, ChannelUsageError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except ApiError as exc:
        print(f"{prog}: error: {exc.describe()}", file=sys.stderr)
        if prog == "cronlog jobs update" and exc.code == grpc.StatusCode.FAILED_PRECONDITION:
            print(f"hint: the job is not as this update expected it (changed since it was "
                  f"read, or deleted); `cronlog jobs get {args.job_id}` shows it now, and "
                  f"running the update again applies yours on top of it", file=sys.stderr)
        return 1
    time_zone = args.time_zone if args.command == "preview" else None
    print(render(answer, args.output_format, time_zone))
    if (isinstance(answer, pb.GetRunResponse) and args.action == "wait"
            and answer.run.status != pb.RUN_STATUS_SUCCEEDED):
        return EXIT_RUN_NOT_SUCCEEDED
    if isinstance(answer, pb.TestChannelResponse) and not answer.delivered:
        return EXIT_NOT_DELIVERED
    if isinstance(answer, pb.VerifyHistoryResponse) and not answer.holds:
        return EXIT_VIOLATED
    return 0
