"""The console's web adapter: Starlette routes over the page logic (console_base.py:
rendering, sessions, CSRF and the page guard; signin_pages.py; job_forms.py; middleware.py:
the headers that keep the pages to themselves and the Host check)."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from cronlog.console import pages
from cronlog.console.ports import ApiRefused
from cronlog.console.sessions import Session
from cronlog.infra.console.console_base import package_dir
from cronlog.infra.console.job_forms import JobForms
from cronlog.infra.console.middleware import HostCheck, SecurityHeaders
from cronlog.infra.console.page_gate import PageGate
from cronlog.infra.console.signin_pages import SignInPages

__all__ = ["Console", "PageGate", "build_app"]


class Console(SignInPages, JobForms):
    """Every page: the sign-in and form pages from their classes, the views here."""

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

    async def run(self, request: Request, session: Session) -> Response:
        view = await run_in_threadpool(pages.run_view, self.api, session.credentials,
                                       request.path_params["run_id"], self.viewer_zone(request))
        q = request.query_params
        return self.render("run.html", session=session, view=view,
                           done=q.get("done", "")[:200], request_id=q.get("request_id", "")[:64],
                           action_request_id=str(uuid.uuid4()))

    async def run_action(self, request: Request, session: Session) -> Response:
        """Cancel (a run not ended) or re-drive (a dead letter), from the run's page."""
        run_id = request.path_params["run_id"]
        request_id = request.state.form.get("request_id") or str(uuid.uuid4())
        done = await run_in_threadpool(pages.run_action, self.api, session.credentials,
                                       request.path_params["action"], run_id, request_id)
        return RedirectResponse(f"/runs/{run_id}?" + urlencode(
            {"done": done.message, "request_id": request_id}), 303)

    async def overview(self, request: Request, session: Session) -> Response:
        view = await run_in_threadpool(pages.overview_view, self.history, session.tenant_label,
                                       self.clock())
        return self.render("overview.html", session=session, view=view)

    async def workers(self, request: Request, session: Session) -> Response:
        view = await run_in_threadpool(pages.workers_view, self.api, session.credentials,
                                       self.clock())
        return self.render("workers.html", session=session, view=view)

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
        Route("/jobs/{job_id}/what-if", post(console.what_if), methods=["POST"]),
        Route("/jobs/{job_id}/backfill", page(console.backfill_form), methods=["GET"]),
        Route("/jobs/{job_id}/backfill", post(console.backfill), methods=["POST"]),
        Route("/jobs/{job_id}/restore", page(console.restore_form), methods=["GET"]),
        Route("/jobs/{job_id}/restore", post(console.restore), methods=["POST"]),
        Route("/jobs/{job_id}/{action}", post(console.act), methods=["POST"]),
        Route("/runs/{run_id}", page(console.run), methods=["GET"]),
        Route("/runs/{run_id}/{action:str}", post(console.run_action), methods=["POST"]),
        Route("/overview", page(console.overview), methods=["GET"]),
        Route("/workers", page(console.workers), methods=["GET"]),
        Mount("/static", StaticFiles(directory=package_dir("static")), name="static"),
    ]
    # The host check outermost: a refused host gets no page, only the security headers'
    # absence (it is no page of this console's).
    return Starlette(routes=routes, middleware=[
        Middleware(HostCheck, allowed_hosts=console.allowed_hosts,
                   refusal_log=console.refusal_log),
        Middleware(SecurityHeaders)])
