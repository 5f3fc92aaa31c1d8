"""The pages with a form of a job's values: new, edit, backfill and restore. A refused form comes
back as filled, with the api's reason and a new request id."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from cronlog.console import pages
from cronlog.console.pages.actions import ActionDone
from cronlog.console.ports import ApiRefused, Credentials, JobsApi, JobSummary
from cronlog.console.sessions import Session
from cronlog.infra.console.console_base import HTTP_STATUS, ConsoleBase

FormAction = Callable[[JobsApi, Credentials, str, Mapping[str, str], str], ActionDone]
Refreshed = Callable[[dict[str, str], JobSummary], dict[str, str]]


class JobForms(ConsoleBase):
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

    async def edit(self, request: Request, session: Session) -> Response:
        job = await run_in_threadpool(pages.job_of, self.api, session.credentials,
                                      request.path_params["job_id"])
        form = {"name": job.name, "handler": job.handler, "queue": job.queue,
                "cron": job.schedule, "time_zone": job.time_zone,
                "payload": job.payload.decode("utf-8", "replace"),
                "labels": pages.labels_text(job.labels),
                "version": str(job.version)}
        return self._form_page("job_edit.html", session, job, form)

    async def update(self, request: Request, session: Session) -> Response:
        return await self._submit(request, session, pages.update_job, "job_edit.html",
                                  refreshed=_at_new_spec)

    async def backfill_form(self, request: Request, session: Session) -> Response:
        job = await run_in_threadpool(pages.job_of, self.api, session.credentials,
                                      request.path_params["job_id"])
        now = self.clock().replace(microsecond=0, tzinfo=None)
        form = {"from": (now - pages.BACKFILL_DEFAULT).isoformat(), "until": now.isoformat()}
        return self._form_page("backfill.html", session, job, form)

    async def backfill(self, request: Request, session: Session) -> Response:
        return await self._submit(request, session, pages.backfill_job, "backfill.html")

    async def what_if(self, request: Request, session: Session) -> Response:
        """The update form's change replayed over the job's recent history, shown on the
        form before it is confirmed (nothing is written)."""
        job_id = request.path_params["job_id"]
        form: dict[str, str] = request.state.form
        job = await run_in_threadpool(pages.job_of, self.api, session.credentials, job_id)
        try:
            summary = await run_in_threadpool(pages.what_if_of, self.api, session.credentials,
                                              job_id, form, self.clock())
        except ApiRefused as exc:
            if exc.code not in ("INVALID_ARGUMENT", "FAILED_PRECONDITION",
                                "RESOURCE_EXHAUSTED"):
                raise
            return self._form_page("job_edit.html", session, job, form,
                                   HTTP_STATUS[exc.code], exc)
        # The same request id: the update itself is not sent yet.
        return self.render("job_edit.html", 200, session, job=job, form=form, error=None,
                           request_id=form.get("request_id") or str(uuid.uuid4()),
                           what_if=summary)

    async def restore_form(self, request: Request, session: Session) -> Response:
        job = await run_in_threadpool(pages.job_of, self.api, session.credentials,
                                      request.path_params["job_id"])
        # The version before the last change is what a restore most often wants.
        form = {"version": str(max(1, job.version - 1))}
        return self._form_page("restore.html", session, job, form)

    async def restore(self, request: Request, session: Session) -> Response:
        return await self._submit(request, session, pages.restore_job, "restore.html")

    def _form_page(self, template: str, session: Session, job: JobSummary,
                   form: Mapping[str, str], status: int = 200,
                   error: ApiRefused | None = None) -> Response:
        # A new request id each time the form is shown: a refused one keeps its outcome.
        return self.render(template, status, session, job=job, form=form, error=error,
                           request_id=str(uuid.uuid4()))

    async def _submit(self, request: Request, session: Session, action: FormAction,
                      template: str, refreshed: Refreshed = lambda form, job: form
                      ) -> Response:
        """The form's action on the job; refused for its values or the job's state, the
        form again as filled (through `refreshed` when the job changed meanwhile)."""
        job_id = request.path_params["job_id"]
        form: dict[str, str] = request.state.form
        request_id = form.get("request_id") or str(uuid.uuid4())
        try:
            done = await run_in_threadpool(action, self.api, session.credentials, job_id,
                                           form, request_id)
        except ApiRefused as exc:
            if exc.code not in ("INVALID_ARGUMENT", "FAILED_PRECONDITION"):
                raise
            job = await run_in_threadpool(pages.job_of, self.api, session.credentials, job_id)
            if exc.code == "FAILED_PRECONDITION":
                form = refreshed(form, job)
            return self._form_page(template, session, job, form, HTTP_STATUS[exc.code], exc)
        return RedirectResponse(f"/jobs/{job_id}?" + urlencode(
            {"done": done.message, "request_id": request_id}), 303)


def _at_new_spec(form: dict[str, str], job: JobSummary) -> dict[str, str]:
    """A job changed meanwhile: the form now says so and is at its new spec (the changes are
    on the job page), so sending it again replaces that one."""
    return {**form, "version": str(job.version)}
