"""Signed-in sessions and their CSRF tokens, kept in the console's memory.

The browser holds only a random session id (HttpOnly, SameSite=Strict cookie); the tenant
token stays on the server, so signing out or the session's expiry makes a copied cookie
worthless. Time is passed in."""

from __future__ import annotations

import hmac
import secrets
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from cronlog.console.ports import Credentials

IDLE_TIMEOUT = timedelta(hours=8)
MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class Session:
    session_id: str
    credentials: Credentials
    csrf_token: str
    last_seen: datetime
    open_mode: bool
    # The tenant's name when known: picked (open mode), or learned from its jobs.
    tenant_label: str


class SessionStore:
    def __init__(self, idle_timeout: timedelta = IDLE_TIMEOUT,
                 max_sessions: int = MAX_SESSIONS) -> None:
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._idle = idle_timeout
        self._max = max_sessions

    def start(self, credentials: Credentials, now: datetime, open_mode: bool) -> Session:
        session = Session(secrets.token_urlsafe(32), credentials, secrets.token_urlsafe(32),
                          now, open_mode, credentials.tenant)
        with self._lock:
            self._expire(now)
            # Bounded: sign-ins cannot grow the console's memory without end; the oldest
            # session goes first.
            while len(self._sessions) >= self._max:
                oldest = min(self._sessions.values(), key=lambda s: s.last_seen)
                del self._sessions[oldest.session_id]
            self._sessions[session.session_id] = session
        return session

    def find(self, session_id: str | None, now: datetime) -> Session | None:
        if not session_id:
            return None
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.last_seen > self._idle:
                del self._sessions[session_id]
                return None
            session = replace(session, last_seen=now)
            self._sessions[session_id] = session
            return session

    def label(self, session_id: str, tenant: str) -> None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and not session.tenant_label:
                self._sessions[session_id] = replace(session, tenant_label=tenant)

    def end(self, session_id: str | None) -> None:
        with self._lock:
            self._sessions.pop(session_id or "", None)

    def _expire(self, now: datetime) -> None:
        for sid in [s.session_id for s in self._sessions.values()
                    if now - s.last_seen > self._idle]:
            del self._sessions[sid]


def csrf_matches(expected: str, presented: str | None) -> bool:
    return bool(presented) and hmac.compare_digest(expected.encode(), (presented or "").encode())


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)
