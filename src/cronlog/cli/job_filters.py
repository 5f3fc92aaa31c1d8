"""`cronlog jobs list`'s filters: options to ListJobs' request fields (the api bounds them
and names the field it refuses)."""

from __future__ import annotations

import argparse

from cronlog.v1 import job_service_pb2 as pb

LISTED_STATUSES = ["active", "paused", "completed"]


def add_job_filter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--status", dest="statuses", action="append", default=[],
                        choices=LISTED_STATUSES,
                        help="only jobs in this status (repeat for any of several)")
    parser.add_argument("--queue", default="", help="only jobs of this queue")
    parser.add_argument("--label", dest="labels", action="append", default=[],
                        metavar="KEY[=VALUE]",
                        help="only jobs with this label (KEY alone: any value); repeat for all "
                             "of several")
    parser.add_argument("--name", dest="name_contains", default="",
                        help="only jobs whose name contains this, ignoring case")


def label_selector(text: str) -> pb.LabelSelector:
    """KEY=VALUE, or KEY for the key with any value; the key ends at the first =."""
    key, sep, value = text.partition("=")
    return pb.LabelSelector(key=key, value=value) if sep else pb.LabelSelector(key=key)


def list_jobs_request(args: argparse.Namespace) -> pb.ListJobsRequest:
    return pb.ListJobsRequest(
        tenant=args.tenant, page_size=args.page_size, page_token=args.page_token,
        statuses=[pb.JobStatus.Value(f"JOB_STATUS_{s.upper()}") for s in args.statuses],
        queue=args.queue, labels=[label_selector(t) for t in args.labels],
        name_contains=args.name_contains)
