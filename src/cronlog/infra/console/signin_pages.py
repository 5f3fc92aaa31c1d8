"""Signing in (a token, or a tenant's name when the api has no tokens) and out."""

from __future__ import annotations

import logging

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from cronlog.console import pages
from cronlog.console.ports import ApiRefused, Credentials
from cronlog.console.sessions import Session, csrf_matches, new_csrf_token
from cronlog.domain.spec import TENANT_PATTERN
from cronlog.infra.console.console_base import SESSION_COOKIE, SIGNIN_CSRF_COOKIE, ConsoleBase

log = logging.getLogger(__name__)


class SignInPages(ConsoleBase):
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
