"""Signed-in sessions and their CSRF tokens, kept in the console's memory.

The browser holds only a random session id (HttpOnly, SameSite=Strict cookie); the tenant
token stays on the server, so signing out or the session's expiry makes a copied cookie
worthless. Time is passed in.

Sessions are bounded twice: at most `per_tenant` for one tenant (its oldest goes first), and
at most `max_sessions` in all, where a sign-in over the total ends the oldest session of the
tenant holding the most (the signing-in tenant's own on a tie). So a flood of sign-ins with
one tenant's token only ever ends that tenant's sessions, never another's that holds fewer.
A tenant is its token (a digest of it) when the api has tokens, the picked name in open mode
(no authentication there: a convenience, not a boundary)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from cronlog.console.ports import Credentials

IDLE_TIMEOUT = timedelta(hours=8)
MAX_SESSIONS = 10_000
MAX_SESSIONS_PER_TENANT = 100


def share_key(credentials: Credentials) -> str:
    """Whose share a session and its pages count against: the token's tenant (named by a
    digest of the token, since the tenant's name is known only once it has jobs), or in open
    mode the picked tenant."""
    if credentials.token:
        return "token:" + hashlib.sha256(credentials.token.encode()).hexdigest()[:32]
    return "tenant:" + credentials.tenant


@dataclass(frozen=True)
class Session:
    session_id: str
    credentials: Credentials
    csrf_token: str
    last_seen: datetime
    open_mode: bool
    # The tenant's name when known: picked (open mode), or learned from its jobs.
    tenant_label: str
    # Whose share it counts against (share_key).
    share_key: str = ""


class SessionStore:
    def __init__(self, idle_timeout: timedelta = IDLE_TIMEOUT,
                 max_sessions: int = MAX_SESSIONS,
                 per_tenant: int = MAX_SESSIONS_PER_TENANT) -> None:
        if not 1 <= per_tenant <= max_sessions:
            raise ValueError(f"per_tenant {per_tenant} must be 1 to max_sessions {max_sessions}")
        self._sessions: dict[str, Session] = {}
        # Each tenant's session ids, least recently seen first.
        self._by_key: dict[str, OrderedDict[str, None]] = {}
        self._lock = threading.Lock()
        self._idle = idle_timeout
        self._max = max_sessions
        self._per_tenant = per_tenant

    def __len__(self) -> int:
        return len(self._sessions)

    def count(self, key: str) -> int:
        with self._lock:
            return len(self._by_key.get(key, ()))

    def start(self, credentials: Credentials, now: datetime, open_mode: bool) -> Session:
        key = share_key(credentials)
        session = Session(secrets.token_urlsafe(32), credentials, secrets.token_urlsafe(32),
                          now, open_mode, credentials.tenant, key)
        with self._lock:
            self._expire(now)
            # Bounded: sign-ins cannot grow the console's memory without end, and one
            # tenant's cannot end another's. At most one eviction each: the bounds hold
            # before every start.
            if len(self._by_key.get(key, ())) >= self._per_tenant:
                self._drop_oldest(key)
            elif len(self._sessions) >= self._max:
                # The tenant holding the most; the signing-in one on a tie. O(tenants), only
                # when the console is full.
                mine = len(self._by_key.get(key, ()))
                victim = max(self._by_key, key=lambda k: len(self._by_key[k]))
                if mine and len(self._by_key[victim]) <= mine:
                    victim = key
                self._drop_oldest(victim)
            self._sessions[session.session_id] = session
            self._by_key.setdefault(key, OrderedDict())[session.session_id] = None
        return session

    def find(self, session_id: str | None, now: datetime) -> Session | None:
        if not session_id:
            return None
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.last_seen > self._idle:
                self._remove(session)
                return None
            session = replace(session, last_seen=now)
            self._sessions[session_id] = session
            self._by_key[session.share_key].move_to_end(session_id)
            return session

    def label(self, session_id: str, tenant: str) -> None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and not session.tenant_label:
                self._sessions[session_id] = replace(session, tenant_label=tenant)

    def end(self, session_id: str | None) -> None:
        with self._lock:
            session = self._sessions.get(session_id or "")
            if session is not None:
                self._remove(session)

    def _remove(self, session: Session) -> None:
        del self._sessions[session.session_id]
        ids = self._by_key[session.share_key]
        del ids[session.session_id]
        if not ids:
            del self._by_key[session.share_key]

    def _drop_oldest(self, key: str) -> None:
        ids = self._by_key.get(key)
        if ids:
            self._remove(self._sessions[next(iter(ids))])

    def _expire(self, now: datetime) -> None:
        # Each tenant's ids are in the order last seen: only the expired fronts are read.
        for key in list(self._by_key):
            ids = self._by_key.get(key)
            while ids:
                session = self._sessions[next(iter(ids))]
                if now - session.last_seen <= self._idle:
                    break
                self._remove(session)
                ids = self._by_key.get(key)


def csrf_matches(expected: str, presented: str | None) -> bool:
    return bool(presented) and hmac.compare_digest(expected.encode(), (presented or "").encode())


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)
