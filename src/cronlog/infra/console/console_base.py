"""What every page of the console shares: its settings and sessions, rendering, cookies,
forms read within bounds, and the guard that gives a page its session, its CSRF check and
its tenant's share of the pages served."""

from __future__ import annotations

import importlib.resources
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from cronlog.console import pages
from cronlog.console.budget import page_deadline
from cronlog.console.fair_share import share_of
from cronlog.console.ports import ApiRefused, JobsApi, RunHistory
from cronlog.console.sessions import Session, SessionStore, csrf_matches
from cronlog.infra.console.hosts import LOOPBACK_HOSTS
from cronlog.infra.console.page_gate import PageGate
from cronlog.infra.observability.log_rate import LogRate

SESSION_COOKIE = "cronlog_session"
SIGNIN_CSRF_COOKIE = "cronlog_signin_csrf"
ZONE_COOKIE = "cronlog_tz"
# Form bodies are small; a bigger one is refused before it is parsed.
MAX_FORM_BYTES = 64 * 1024
FORM_FIELD_LIMIT = 4096
HTTP_STATUS = {"NOT_FOUND": 404, "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 409,
               "PERMISSION_DENIED": 403, "RESOURCE_EXHAUSTED": 429, "UNAUTHENTICATED": 401}

Clock = Callable[[], datetime]
# Pages in progress at once: within the 40 threads Starlette's run_in_threadpool has (anyio's
# default), leaving some for the sign-in page and the static files.
PAGE_CAPACITY = 32
PAGE_SECONDS = 5.0

Handler = Callable[[Request, Session], Awaitable[Response]]


def package_dir(name: str) -> Path:
    return Path(str(importlib.resources.files("cronlog.infra.console").joinpath(name)))


def templates() -> Environment:
    env = Environment(loader=FileSystemLoader(package_dir("templates")),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["seconds"] = lambda v: "" if v is None else f"{v:.3f} s"
    env.filters["utc"] = lambda v: "" if v is None else v.strftime("%Y-%m-%d %H:%M:%S UTC")
    return env


class ConsoleBase:
    """The console's settings and plumbing; its pages are the methods of its subclasses."""

    def __init__(self, api: JobsApi, history: RunHistory, *, secure_cookie: bool = False,
                 clock: Clock = lambda: datetime.now(UTC),
                 sessions: SessionStore | None = None,
                 allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS,
                 page_seconds: float = PAGE_SECONDS, tenant_share: float = 0.5,
                 page_capacity: int = PAGE_CAPACITY,
                 refusal_log: LogRate | None = None) -> None:
        self.api = api
        self.history = history
        self.secure_cookie = secure_cookie
        self.clock = clock
        self.sessions = sessions if sessions is not None else SessionStore()
        self.env = templates()
        self.allowed_hosts = frozenset(allowed_hosts)
        self.page_seconds = page_seconds
        self.pages = PageGate(page_capacity, share_of(page_capacity, tenant_share))
        # Refused sign-ins and host names: a line for some, a count for the rest.
        self.refusal_log = refusal_log if refusal_log is not None else LogRate()

    # --- plumbing -------------------------------------------------------------------
    def render(self, name: str, status: int = 200, session: Session | None = None,
               **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(session=session, **context)
        return HTMLResponse(html, status_code=status)

    def _cookie(self, response: Response, name: str, value: str, max_age: int | None) -> None:
        response.set_cookie(name, value, max_age=max_age, path="/", httponly=True,
                            samesite="strict", secure=self.secure_cookie)

    def session_of(self, request: Request) -> Session | None:
        return self.sessions.find(request.cookies.get(SESSION_COOKIE), self.clock())

    @staticmethod
    def viewer_zone(request: Request) -> Any:
        return pages.zone(request.cookies.get(ZONE_COOKIE, "")[:64])

    @staticmethod
    async def form(request: Request) -> FormData:
        length = request.headers.get("content-length", "")
        if not length.isdigit() or int(length) > MAX_FORM_BYTES:
            raise ApiRefused("INVALID_ARGUMENT", "the form is too large or has no length", "form")
        return await request.form(max_files=0, max_fields=32)

    @staticmethod
    def _same_origin(request: Request) -> bool:
        """Browsers send Origin on POST: another site's form is refused even before its
        missing CSRF token is."""
        origin = request.headers.get("origin")
        if origin is None or origin == "null":
            return origin is None
        host = request.headers.get("host", "")
        return origin.split("://", 1)[-1] == host

    def refused(self, exc: ApiRefused, session: Session | None) -> Response:
        if exc.code == "UNAUTHENTICATED" and session is not None:
            self.sessions.end(session.session_id)
            return RedirectResponse("/signin", 303)
        return self.render("error.html", HTTP_STATUS.get(exc.code, 502), session, error=exc)

    def guarded(self, post: bool = False
                ) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
        """Pages need a session; POSTs also the same origin and the session's CSRF token."""
        def wrap(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
            async def endpoint(request: Request) -> Response:
                session = self.session_of(request)
                if session is None:
                    if post:
                        return PlainTextResponse("sign in first", 403)
                    return RedirectResponse("/signin", 303)
                with page_deadline(self.page_seconds):
                    if not await self.pages.enter(session.share_key, self.page_seconds):
                        return self.render("error.html", 429, session, error=ApiRefused(
                            "RESOURCE_EXHAUSTED", "too many of this tenant's pages are being "
                            "served at once; try again in a moment"))
                    try:
                        return await self._serve(handler, request, session, post)
                    finally:
                        self.pages.leave(session.share_key)
            return endpoint
        return wrap

    async def _serve(self, handler: Handler, request: Request, session: Session,
                     post: bool) -> Response:
        try:
            if post:
                if not self._same_origin(request):
                    return PlainTextResponse("cross-origin request refused", 403)
                form = await self.form(request)
                token = form.get("csrf")
                if not csrf_matches(session.csrf_token,
                                    token if isinstance(token, str) else None):
                    return PlainTextResponse("missing or wrong CSRF token", 403)
                request.state.form = {k: v[:FORM_FIELD_LIMIT] for k, v in form.items()
                                      if isinstance(v, str)}
            return await handler(request, session)
        except ApiRefused as exc:
            return self.refused(exc, session)

