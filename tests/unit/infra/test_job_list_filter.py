"""ListJobs' filters as the api reads them: every field bounded, a bad one refused naming
it; and the SQL each filter adds (only the conditions it uses, a name's wildcards escaped)."""

from __future__ import annotations

from uuid import uuid4

import pytest

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.spec import MAX_LABEL_CHARS, MAX_LABELS
from cronlog.infra.grpc.job_list_filter import MAX_NAME_CONTAINS, job_list_filter
from cronlog.infra.postgres.job_listing import labels_json, update_params
from cronlog.infra.postgres.job_queries import JobListFilter, filter_sql, like_pattern
from cronlog.v1 import job_service_pb2 as pb


def test_no_filter_is_an_inactive_filter() -> None:
    assert job_list_filter(pb.ListJobsRequest(page_size=5)) == JobListFilter()
    assert not JobListFilter().active


def test_filters_are_read_as_given() -> None:
    request = pb.ListJobsRequest(
        statuses=[pb.JOB_STATUS_PAUSED, pb.JOB_STATUS_ACTIVE], queue="batch-1.x",
        labels=[pb.LabelSelector(key="team", value="data"), pb.LabelSelector(key="tier"),
                pb.LabelSelector(key="empty", value="")],
        name_contains="Report")
    assert job_list_filter(request) == JobListFilter(
        statuses=("paused", "active"), queue="batch-1.x",
        labels=(("team", "data"), ("tier", None), ("empty", "")), name_contains="Report")


@pytest.mark.parametrize(("request_", "field"), [
    (pb.ListJobsRequest(statuses=[pb.JOB_STATUS_DELETED]), "statuses"),
    (pb.ListJobsRequest(statuses=[pb.JOB_STATUS_UNSPECIFIED]), "statuses"),
    (pb.ListJobsRequest(statuses=[pb.JobStatus.ValueType(99)]), "statuses"),
    (pb.ListJobsRequest(statuses=[pb.JOB_STATUS_ACTIVE, pb.JOB_STATUS_ACTIVE]), "statuses"),
    (pb.ListJobsRequest(queue="no spaces"), "queue"),
    (pb.ListJobsRequest(queue="q" * 129), "queue"),
    (pb.ListJobsRequest(name_contains="n" * (MAX_NAME_CONTAINS + 1)), "name_contains"),
    (pb.ListJobsRequest(name_contains="a\x00"), "name_contains"),
    (pb.ListJobsRequest(labels=[pb.LabelSelector(key="")]), "labels"),
    (pb.ListJobsRequest(labels=[pb.LabelSelector(key="k" * (MAX_LABEL_CHARS + 1))]), "labels"),
    (pb.ListJobsRequest(labels=[pb.LabelSelector(key="k", value="v" * (MAX_LABEL_CHARS + 1))]),
     "labels"),
    (pb.ListJobsRequest(labels=[pb.LabelSelector(key="k\x00")]), "labels"),
    (pb.ListJobsRequest(labels=[pb.LabelSelector(key="k", value="\x00")]), "labels"),
    (pb.ListJobsRequest(labels=[pb.LabelSelector(key=f"k{n}") for n in range(MAX_LABELS + 1)]),
     "labels"),
])
def test_a_bad_filter_is_refused_naming_its_field(request_: pb.ListJobsRequest,
                                                  field: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        job_list_filter(request_)
    assert refused.value.field == field


def test_the_bounds_themselves_are_accepted() -> None:
    request = pb.ListJobsRequest(
        queue="q" * 128, name_contains="n" * MAX_NAME_CONTAINS,
        statuses=[pb.JOB_STATUS_ACTIVE, pb.JOB_STATUS_PAUSED, pb.JOB_STATUS_COMPLETED],
        labels=[pb.LabelSelector(key="k" * MAX_LABEL_CHARS, value="v" * MAX_LABEL_CHARS)]
        + [pb.LabelSelector(key=f"k{n}") for n in range(MAX_LABELS - 1)])
    assert job_list_filter(request).active


def test_like_pattern_takes_wildcards_and_the_escape_literally() -> None:
    assert like_pattern("a%b_c\\d") == "%a\\%b\\_c\\\\d%"
    assert like_pattern("plain") == "%plain%"


def test_the_sql_has_only_the_conditions_used_and_values_only_as_parameters() -> None:
    query, params = filter_sql("alpha", False, JobListFilter(queue="batch"))
    assert "l.queue = %(queue)s" in query and "ILIKE" not in query and "labels" not in query
    assert "l.tenant = %(tenant)s AND j.tenant = %(tenant)s" in query
    assert params == {"queue": "batch"}
    query, params = filter_sql(None, True, JobListFilter(
        labels=(("team", "da'ta"), ("tier", None)), name_contains="x'"))
    assert "%(tenant)s" not in query and "da'ta" not in query and "x'" not in query
    assert "l.labels @> %(label_0)s::jsonb" in query and "l.labels ? %(label_1)s" in query
    assert params == {"label_0": '{"team": "da\'ta"}', "label_1": "tier", "name_like": "%x'%"}


def test_listing_changes_only_for_updates_that_touch_listed_columns() -> None:
    a, b, c = uuid4(), uuid4(), uuid4()
    assert update_params({a: {"next_fire_at": None, "version": 3}}) is None
    params = update_params({a: {"status": "paused"},
                            b: {"name": "n", "queue": "q", "labels": (("k", "v"),)},
                            c: {"last_fired_at": None}})
    assert params == {"job_id": [a, b], "status": ["paused", None], "name": [None, "n"],
                      "queue": [None, "q"], "labels": [None, '{"k": "v"}']}


def test_a_nul_in_a_label_is_listed_as_a_replacement_character() -> None:
    assert labels_json({"n\x00": "a\x00b"}) == '{"n\\ufffd": "a\\ufffdb"}'
