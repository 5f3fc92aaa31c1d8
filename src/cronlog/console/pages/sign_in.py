"""Signing in: the page, and a tenant token checked against the api."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cronlog.console.ports import ApiRefused, Credentials, HistoryUnavailable, JobsApi, RunHistory


@dataclass(frozen=True)
class SignInView:
    open_mode: bool
    tenants: Sequence[str]


def sign_in_view(api: JobsApi, history: RunHistory) -> SignInView:
    if not api.probe_open():
        return SignInView(False, ())
    try:
        tenants = list(history.tenants(50))
    except HistoryUnavailable:
        tenants = []
    return SignInView(True, tenants)


def sign_in_with_token(api: JobsApi, token: str) -> Credentials:
    """Checks the token with the api (UNAUTHENTICATED for an unknown one) and names the
    tenant from its jobs when it has any."""
    who = Credentials(token.strip(), "")
    if not who.token:
        raise ApiRefused("UNAUTHENTICATED", "enter your tenant token", "token")
    page = api.list_jobs(who, 1, "")
    return Credentials(who.token, page.jobs[0].tenant if page.jobs else "")
