"""The console's web adapter: Starlette routes over the page logic, Jinja2 templates with
autoescape, sessions in HttpOnly SameSite=Strict cookies, a CSRF token on every form, a
confirmation step before every action, and headers that keep the pages to themselves."""

from __future__ import annotations

import importlib.resources
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from cronlog.console import pages
from cronlog.console.budget import page_deadline
from cronlog.console.fair_share import ShareLedger, share_of
from cronlog.console.ports import ApiRefused, Credentials, JobsApi, RunHistory
from cronlog.console.sessions import Session, SessionStore, csrf_matches, new_csrf_token
from cronlog.domain.spec import TENANT_PATTERN
from cronlog.infra.console.hosts import LOOPBACK_HOSTS, host_allowed
from cronlog.infra.observability.log_rate import LogRate

log = logging.getLogger(__name__)

SESSION_COOKIE = "cronlog_session"
SIGNIN_CSRF_COOKIE = "cronlog_signin_csrf"
ZONE_COOKIE = "cronlog_tz"
# Form bodies are small; a bigger one is refused before it is parsed.
MAX_FORM_BYTES = 64 * 1024
FORM_FIELD_LIMIT = 4096
HTTP_STATUS = {"NOT_FOUND": 404, "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 409,
               "PERMISSION_DENIED": 403, "RESOURCE_EXHAUSTED": 429, "UNAUTHENTICATED": 401}
SECURITY_HEADERS = {
    # Scripts, styles and images only from the console itself: no inline script can run,
    # so escaped output that slipped into a script context still could not execute.
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; frame-ancestors 'none'; "
                               "form-action 'self'; base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    # Not no-referrer: with it Chromium sends `Origin: null` on the console's own forms,
    # which the origin check must refuse. Same-origin still leaks no URL to other sites.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}

Clock = Callable[[], datetime]
# Pages in progress at once: within the 40 threads Starlette's run_in_threadpool has (anyio's
# default), leaving some for the sign-in page and the static files.
PAGE_CAPACITY = 32
PAGE_SECONDS = 5.0
# Answered without a Host check: a load balancer's probe may name the console by address.
UNCHECKED_PATHS = frozenset({"/healthz"})


class PageGate:
    """The pages in progress, at most `share` of `capacity` for one tenant (a session's
    share_key): a tenant opening pages faster than they finish waits (without a thread) for
    one of its own to end, and the others' pages go on."""

    def __init__(self, capacity: int, share: int, poll_seconds: float = 0.02) -> None:
        self._ledger = ShareLedger(capacity, share)
        self._lock = threading.Lock()
        self._poll = poll_seconds

    def try_enter(self, key: str) -> bool:
        with self._lock:
            return self._ledger.take(key)

    async def enter(self, key: str, timeout: float) -> bool:
        """Whether a place was had within timeout seconds."""
        deadline = time.monotonic() + timeout
        while not self.try_enter(key):
            if time.monotonic() >= deadline:
                return False
            # Polled rather than awaited on a condition: no event-loop-bound state, and a
            # wait here is the exception (a tenant over its share).
            await anyio.sleep(self._poll)
        return True

    def leave(self, key: str) -> None:
        with self._lock:
            self._ledger.give(key)

    def held(self, key: str) -> int:
        with self._lock:
            return self._ledger.held(key)


def _package_dir(name: str) -> Path:
    return Path(str(importlib.resources.files("cronlog.infra.console").joinpath(name)))


def templates() -> Environment:
    env = Environment(loader=FileSystemLoader(_package_dir("templates")),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["seconds"] = lambda v: "" if v is None else f"{v:.3f} s"
    env.filters["utc"] = lambda v: "" if v is None else v.strftime("%Y-%m-%d %H:%M:%S UTC")
    return env


class _SecurityHeaders(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        for key, value in SECURITY_HEADERS.items():
            response.headers.setdefault(key, value)
        return response


class _HostCheck(BaseHTTPMiddleware):
    """Only the allowed Host names (hosts.py: DNS rebinding); 421 for any other."""

    def __init__(self, app: Any, console: Console) -> None:
        super().__init__(app)
        self._console = console

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        console = self._console
        if (request.url.path not in UNCHECKED_PATHS
                and not host_allowed(request.headers.get("host"), console.allowed_hosts)):
            console.refusal_log.log(log, logging.WARNING,
                                    "refused a request for a host not in CRONLOG_CONSOLE_HOSTS "
                                    "from %s", request.client.host if request.client else "?")
            return PlainTextResponse("this console does not answer to that host name "
                                     "(CRONLOG_CONSOLE_HOSTS)", 421)
        return await call_next(request)


class Console:
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

    def guarded(self, post: bool = False) -> Callable[
            [Callable[[Request, Session], Awaitable[Response]]],
            Callable[[Request], Awaitable[Response]]]:
        """Pages need a session; POSTs also the same origin and the session's CSRF token."""
        def wrap(handler: Callable[[Request, Session], Awaitable[Response]]
                 ) -> Callable[[Request], Awaitable[Response]]:
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

    async def _serve(self, handler: Callable[[Request, Session], Awaitable[Response]],
                     request: Request, session: Session, post: bool) -> Response:
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

    # --- sign in ----------------------------------------------------------------------
    async def signin_page(self, request: Request) -> Response:
        csrf = new_csrf_token()
        try:
            view = await run_in_threadpool(pages.sign_in_view, self.api, self.history)
        except ApiRefused as exc:
            return self.render("error.html", 502, None, error=exc)
        response = self.render("signin.html", view=view, csrf=csrf, error=None)
        self._cookie(response, SIGNIN_CSRF_COOKIE, csrf, 600)
        return response

    async def signin(self, request: Request) -> Response:
        if not self._same_origin(request):
            return PlainTextResponse("cross-origin request refused", 403)
        try:
            form = await self.form(request)
        except ApiRefused as exc:
            return self.render("error.html", 400, None, error=exc)
        presented = form.get("csrf")
        if not csrf_matches(request.cookies.get(SIGNIN_CSRF_COOKIE, ""),
                            presented if isinstance(presented, str) else None):
            return PlainTextResponse("missing or wrong CSRF token: reload the sign-in page", 403)
        token, tenant = str(form.get("token", "")), str(form.get("tenant", "")).strip()
        now = self.clock()
        try:
            if await run_in_threadpool(self.api.probe_open):
                if not TENANT_PATTERN.fullmatch(tenant):
                    raise ApiRefused("INVALID_ARGUMENT", "pick or type a tenant name", "tenant")
                session = self.sessions.start(Credentials(None, tenant), now, open_mode=True)
            else:
                who = await run_in_threadpool(pages.sign_in_with_token, self.api, token)
                session = self.sessions.start(who, now, open_mode=False)
        except ApiRefused as exc:
            csrf = new_csrf_token()
            view = pages.SignInView(exc.field_name == "tenant", ())
            message = "unknown token" if exc.code == "UNAUTHENTICATED" and token else exc.reason
            if exc.code == "UNAUTHENTICATED":
                self.refusal_log.log(log, logging.WARNING, "refused a sign-in from %s: %s",
                                     request.client.host if request.client else "?", exc.reason)
            response = self.render("signin.html", 401 if exc.code == "UNAUTHENTICATED" else 400,
                                   view=view, csrf=csrf, error=message)
            self._cookie(response, SIGNIN_CSRF_COOKIE, csrf, 600)
            return response
        signed_in = RedirectResponse("/jobs", 303)
        self._cookie(signed_in, SESSION_COOKIE, session.session_id, None)
        signed_in.delete_cookie(SIGNIN_CSRF_COOKIE, path="/")
        return signed_in

    async def signout(self, request: Request, session: Session) -> Response:
        self.sessions.end(session.session_id)
        response = RedirectResponse("/signin", 303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    # --- pages --------------------------------------------------------------------------
    async def jobs(self, request: Request, session: Session) -> Response:
        q = request.query_params
        filters = pages.JobFilter(status=q.get("status", "")[:32], queue=q.get("queue", "")[:64],
                                  label=q.get("label", "")[:128], name=q.get("name", "")[:128])
        view = await run_in_threadpool(pages.jobs_view, self.api, self.history,
                                       session.credentials, filters, q.get("page", "")[:512],
                                       self.viewer_zone(request))
        if view.rows:
            self.sessions.label(session.session_id, view.rows[0].job.tenant)
            session = self.sessions.find(session.session_id, self.clock()) or session
        more = ""
        if view.next_page_token:
            more = "?" + urlencode({**{k: v for k, v in vars(filters).items() if v},
                                    "page": view.next_page_token})
        return self.render("jobs.html", session=session, view=view, more=more,
                           statuses=pages.JOB_STATUSES)

    async def new_job(self, request: Request, session: Session) -> Response:
        return self.render("job_new.html", session=session, form={}, error=None,
                           request_id=str(uuid.uuid4()))

    async def create_job(self, request: Request, session: Session) -> Response:
        form: dict[str, str] = request.state.form
        request_id = form.get("request_id") or str(uuid.uuid4())
        try:
            job = await run_in_threadpool(pages.create_job, self.api, session.credentials,
                                          form, request_id)
        except ApiRefused as exc:
            if exc.code != "INVALID_ARGUMENT":
                raise
            return self.render("job_new.html", 400, session, form=form, error=exc,
                               request_id=request_id)
        return RedirectResponse(f"/jobs/{job.job_id}?" + urlencode(
            {"done": "created", "request_id": request_id}), 303)

    async def job(self, request: Request, session: Session) -> Response:
        view = await run_in_threadpool(pages.job_view, self.api, self.history,
                                       session.credentials, request.path_params["job_id"],
                                       self.clock(), self.viewer_zone(request))
        self.sessions.label(session.session_id, view.job.tenant)
        session = self.sessions.find(session.session_id, self.clock()) or session
        q = request.query_params
        return self.render("job.html", session=session, view=view,
                           done=q.get("done", "")[:200], request_id=q.get("request_id", "")[:64])

    async def confirm(self, request: Request, session: Session) -> Response:
        action, job_id = request.path_params["action"], request.path_params["job_id"]
        if action not in pages.ACTIONS:
            raise ApiRefused("NOT_FOUND", f"no action {action!r}")
        job = await run_in_threadpool(pages.job_of, self.api, session.credentials, job_id)
        return self.render("confirm.html", session=session, action=action, job=job,
                           target=f"/jobs/{job.job_id}/{action}", request_id=str(uuid.uuid4()))

    async def act(self, request: Request, session: Session) -> Response:
        action, job_id = request.path_params["action"], request.path_params["job_id"]
        request_id = request.state.form.get("request_id") or str(uuid.uuid4())
        done = await run_in_threadpool(pages.job_action, self.api, session.credentials, action,
                                       job_id, request_id)
        if done.run is not None:
            return RedirectResponse(f"/runs/{done.run.run_id}?" + urlencode(
                {"done": done.message, "request_id": request_id}), 303)
        return RedirectResponse(f"/jobs/{job_id}?" + urlencode(
            {"done": done.message, "request_id": request_id}), 303)

    async def edit(self, request: Request, session: Session) -> Response:
        job = await run_in_threadpool(pages.job_of, self.api, session.credentials,
                                      request.path_params["job_id"])
        form = {"name": job.name, "handler": job.handler, "queue": job.queue,
                "cron": job.schedule, "time_zone": job.time_zone,
                "payload": job.payload.decode("utf-8", "replace"),
                "labels": pages.labels_text(job.labels),
                "spec_fingerprint": job.spec_fingerprint}
        return self.render("job_edit.html", session=session, job=job, form=form, error=None,
                           request_id=str(uuid.uuid4()))

    async def update(self, request: Request, session: Session) -> Response:
        job_id = request.path_params["job_id"]
        form: dict[str, str] = request.state.form
        request_id = form.get("request_id") or str(uuid.uuid4())
        try:
            done = await run_in_threadpool(pages.update_job, self.api, session.credentials,
                                           job_id, form, request_id)
        except ApiRefused as exc:
            if exc.code not in ("INVALID_ARGUMENT", "FAILED_PRECONDITION"):
                raise
            # The form again, as filled, with a new request id: the refused one keeps its
            # outcome. A job changed meanwhile: the form now says so and is at its new spec
            # (the changes are on the job page), so sending it again replaces that one.
            job = await run_in_threadpool(pages.job_of, self.api, session.credentials, job_id)
            if exc.code == "FAILED_PRECONDITION":
                form = {**form, "spec_fingerprint": job.spec_fingerprint}
            return self.render("job_edit.html", HTTP_STATUS[exc.code], session, job=job,
                               form=form, error=exc, request_id=str(uuid.uuid4()))
        return RedirectResponse(f"/jobs/{job_id}?" + urlencode(
            {"done": done.message, "request_id": request_id}), 303)

    async def backfill_form(self, request: Request, session: Session) -> Response:
        job = await run_in_threadpool(pages.job_of, self.api, session.credentials,
                                      request.path_params["job_id"])
        now = self.clock().replace(microsecond=0, tzinfo=None)
        form = {"from": (now - pages.BACKFILL_DEFAULT).isoformat(), "until": now.isoformat()}
        return self.render("backfill.html", session=session, job=job, form=form, error=None,
                           request_id=str(uuid.uuid4()))

    async def backfill(self, request: Request, session: Session) -> Response:
        job_id = request.path_params["job_id"]
        form: dict[str, str] = request.state.form
        request_id = form.get("request_id") or str(uuid.uuid4())
        try:
            done = await run_in_threadpool(pages.backfill_job, self.api, session.credentials,
                                           job_id, form, request_id)
        except ApiRefused as exc:
            if exc.code not in ("INVALID_ARGUMENT", "FAILED_PRECONDITION"):
                raise
            job = await run_in_threadpool(pages.job_of, self.api, session.credentials, job_id)
            return self.render("backfill.html", HTTP_STATUS[exc.code], session, job=job,
                               form=form, error=exc, request_id=str(uuid.uuid4()))
        return RedirectResponse(f"/jobs/{job_id}?" + urlencode(
            {"done": done.message, "request_id": request_id}), 303)

    async def run(self, request: Request, session: Session) -> Response:
        view = await run_in_threadpool(pages.run_view, self.api, session.credentials,
                                       request.path_params["run_id"], self.viewer_zone(request))
        q = request.query_params
        return self.render("run.html", session=session, view=view,
                           done=q.get("done", "")[:200], request_id=q.get("request_id", "")[:64],
                           cancel_request_id=str(uuid.uuid4()))

    async def cancel(self, request: Request, session: Session) -> Response:
        run_id = request.path_params["run_id"]
        request_id = request.state.form.get("request_id") or str(uuid.uuid4())
        done = await run_in_threadpool(pages.cancel_run, self.api, session.credentials, run_id,
                                       request_id)
        return RedirectResponse(f"/runs/{run_id}?" + urlencode(
            {"done": done.message, "request_id": request_id}), 303)

    async def overview(self, request: Request, session: Session) -> Response:
        view = await run_in_threadpool(pages.overview_view, self.history, session.tenant_label,
                                       self.clock())
        return self.render("overview.html", session=session, view=view)

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/jobs", 303)

    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok")


def build_app(console: Console) -> Starlette:
    page = console.guarded()
    post = console.guarded(post=True)
    routes = [
        Route("/", console.home),
        Route("/healthz", console.healthz),
        Route("/signin", console.signin_page, methods=["GET"]),
        Route("/signin", console.signin, methods=["POST"]),
        Route("/signout", post(console.signout), methods=["POST"]),
        Route("/jobs", page(console.jobs), methods=["GET"]),
        Route("/jobs", post(console.create_job), methods=["POST"]),
        Route("/jobs/new", page(console.new_job), methods=["GET"]),
        Route("/jobs/{job_id}", page(console.job), methods=["GET"]),
        Route("/jobs/{job_id}/confirm/{action}", page(console.confirm), methods=["GET"]),
        # Before /jobs/{job_id}/{action}, which would take them for actions.
        Route("/jobs/{job_id}/edit", page(console.edit), methods=["GET"]),
        Route("/jobs/{job_id}/update", post(console.update), methods=["POST"]),
        Route("/jobs/{job_id}/backfill", page(console.backfill_form), methods=["GET"]),
        Route("/jobs/{job_id}/backfill", post(console.backfill), methods=["POST"]),
        Route("/jobs/{job_id}/{action}", post(console.act), methods=["POST"]),
        Route("/runs/{run_id}", page(console.run), methods=["GET"]),
        Route("/runs/{run_id}/cancel", post(console.cancel), methods=["POST"]),
        Route("/overview", page(console.overview), methods=["GET"]),
        Mount("/static", StaticFiles(directory=_package_dir("static")), name="static"),
    ]
    # The host check outermost: a refused host gets no page, only the security headers'
    # absence (it is no page of this console's).
    return Starlette(routes=routes, middleware=[Middleware(_HostCheck, console=console),
                                                Middleware(_SecurityHeaders)])
