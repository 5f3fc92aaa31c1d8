"""The calendar RPCs (issue 20, docs/calendars.md): requests to CalendarApi, calendars back.

JobServiceServicer has already scoped each call to the caller's tenant (a request naming
another tenant is PERMISSION_DENIED before it gets here) and translates the errors raised
here into status codes. Without tokens (open mode) the request's tenant is required: a
calendar always belongs to one tenant, and no call lists or reads across tenants.
"""

from __future__ import annotations

from collections.abc import Sequence

from cronlog.commands.api.calendar_api import CalendarApi
from cronlog.commands.api.ports import CalendarView
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import MAX_EXCLUSION_RANGES, AppliedCalendar, Exclusions
from cronlog.infra.grpc.convert import exclusions_in, timestamp_out
from cronlog.infra.grpc.response_size import MAX_RESPONSE_BYTES
from cronlog.infra.postgres.calendar_reads import encode_page_token
from cronlog.v1 import job_service_pb2 as pb

DEFAULT_PAGE = 100
MAX_PAGE = 1000
# Page tokens this adapter hands out are a base64 name, under 180 characters.
MAX_PAGE_TOKEN_CHARS = 512


def tenant_of(caller: str | None, requested: str) -> str:
    """The caller's tenant when authenticated (the request's, if any, was checked to be the
    same); the request's own in open mode, where it is required."""
    if caller is not None:
        return caller
    if not requested:
        raise InvalidSpec("tenant", "a tenant is required (calendars belong to one tenant)")
    return requested


def calendar_out(view: CalendarView) -> pb.Calendar:
    return pb.Calendar(name=view.name, description=view.description,
                       exclusions=view.exclusions.texts(), version=view.version,
                       jobs=view.subscribers, tenant=view.tenant,
                       updated_at=timestamp_out(view.updated_at))


def applied_calendar_out(applied: AppliedCalendar | None) -> pb.AppliedCalendar | None:
    if applied is None:
        return None
    return pb.AppliedCalendar(name=applied.name, version=applied.version, found=applied.found,
                              exclusions=applied.exclusions.texts() if applied.found else [])


def _page_size(value: int) -> int:
    if value < 0:
        raise InvalidSpec("page_size", "must not be negative")
    return min(value or DEFAULT_PAGE, MAX_PAGE)


def _page_token(value: str) -> str | None:
    if len(value) > MAX_PAGE_TOKEN_CHARS:
        raise InvalidSpec("page_token", f"is not a token this service gave out "
                                        f"(over {MAX_PAGE_TOKEN_CHARS} characters)")
    return value or None


def create_calendar(api: CalendarApi, caller: str | None,
                    request: pb.CreateCalendarRequest) -> pb.CreateCalendarResponse:
    view = api.create(request.request_id, tenant_of(caller, request.tenant), request.name,
                      request.description, _texts(request.exclusions))
    return pb.CreateCalendarResponse(calendar=calendar_out(view))


def update_calendar(api: CalendarApi, caller: str | None,
                    request: pb.UpdateCalendarRequest) -> pb.UpdateCalendarResponse:
    view = api.update(request.request_id, tenant_of(caller, request.tenant), request.name,
                      request.description, _texts(request.exclusions),
                      request.expected_version)
    return pb.UpdateCalendarResponse(calendar=calendar_out(view))


def get_calendar(api: CalendarApi, caller: str | None,
                 request: pb.GetCalendarRequest) -> pb.GetCalendarResponse:
    view = api.get(tenant_of(caller, request.tenant), request.name)
    return pb.GetCalendarResponse(calendar=calendar_out(view))


def list_calendars(api: CalendarApi, caller: str | None,
                   request: pb.ListCalendarsRequest) -> pb.ListCalendarsResponse:
    views, token = api.list(tenant_of(caller, request.tenant), _page_size(request.page_size),
                            _page_token(request.page_token))
    # A calendar of 1,000 ranges is about 22 KB: a page of 1,000 of them would pass the
    # 4 MiB a gRPC client takes. As many as fit, and the page after the last one kept.
    response = pb.ListCalendarsResponse()
    size = 0
    for view in views:
        calendar = calendar_out(view)
        size += calendar.ByteSize() + 8
        if response.calendars and size > MAX_RESPONSE_BYTES:
            token = encode_page_token(response.calendars[-1].name)
            break
        response.calendars.append(calendar)
    response.next_page_token = token or ""
    return response


def _texts(values: Sequence[str]) -> list[str]:
    """The request's exclusions, bounded in number before the domain parses them."""
    if len(values) > MAX_EXCLUSION_RANGES:
        raise InvalidSpec("exclusions", f"at most {MAX_EXCLUSION_RANGES} dates or ranges, "
                                        f"got {len(values)}")
    return list(values)


def preview_exclusions(api: CalendarApi | None, caller: str | None,
                       request: pb.PreviewScheduleRequest) -> tuple[Exclusions, str]:
    """The days a preview skips (its own and its calendar's) and words for them."""
    own = exclusions_in(request.exclusions, "exclusions")
    words = []
    if own:
        words.append(f"{len(own.ranges)} excluded date{'s' if len(own.ranges) != 1 else ''} "
                     "or range" + ("s" if len(own.ranges) != 1 else ""))
    if not request.calendar:
        return own, " and ".join(words)
    if api is None:
        raise InvalidSpec("calendar", "this api cannot read calendars")
    named = api.exclusions_of(tenant_of(caller, request.tenant), request.calendar, "calendar")
    words.insert(0, f"calendar {request.calendar}")
    return own.union(named), " and ".join(words)
