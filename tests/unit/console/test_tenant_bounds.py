"""What one tenant can take of the console (issue 33, invariant 12): its share of the history
connections and of the pages in progress, its own sessions only, a page's time limit; the
Host names the console answers to; Secure cookies when remote; refused sign-ins logged at a
bounded rate; the settings that set them, refused by name."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import timedelta

import pytest
from starlette.testclient import TestClient

from cronlog.console.budget import page_deadline, time_left
from cronlog.console.fair_share import FairPool, PoolBusy, ShareLedger, share_of
from cronlog.console.ports import Credentials
from cronlog.console.sessions import SessionStore, share_key
from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.console.app import Console, PageGate, build_app
from cronlog.infra.console.hosts import host_allowed, parse_hosts
from cronlog.infra.console.server import check_console_hosts, console_for, secure_cookie
from cronlog.infra.observability.log_rate import LogRate
from cronlog_dev.processes import settings_env
from tests.support.console_api import NOW, FakeApi, FakeHistory, job
from tests.support.console_web import BASE, csrf_of

TOKENS = {"tok-a": "alpha", "tok-b": "beta"}


# --- the share of connections and pages --------------------------------------------------

def test_a_tenant_holds_at_most_its_share_and_the_rest_stays_for_others() -> None:
    ledger = ShareLedger(capacity=4, share=share_of(4, 0.5))
    assert [ledger.take("a") for _ in range(40)].count(True) == 2
    assert ledger.may_take("b") and ledger.take("b") and ledger.take("b")
    assert not ledger.take("b") and not ledger.take("c")  # all four in use
    ledger.give("a")
    assert ledger.take("c") and ledger.held("a") == 1 and ledger.in_use == 4
    assert not ledger.take("a")  # below its share, but nothing is free
    with pytest.raises(ValueError):
        ledger.give("nobody")


def test_share_of_rounds_down_and_keeps_one() -> None:
    assert share_of(4, 0.5) == 2 and share_of(32, 0.5) == 16
    assert share_of(4, 0.1) == 1 and share_of(1, 0.5) == 1 and share_of(4, 1.0) == 4
    with pytest.raises(ValueError):
        ShareLedger(2, 3)


def test_the_pool_keeps_a_tenant_to_its_share_and_lets_another_through() -> None:
    made: list[int] = []

    def connect() -> int:
        made.append(len(made))
        return len(made)

    pool = FairPool(connect, capacity=4, share=2)
    release = threading.Event()
    holding = threading.Barrier(3)

    def heavy() -> None:
        with pool.lease("a", timeout=5):
            holding.wait()
            release.wait(5)

    threads = [threading.Thread(target=heavy) for _ in range(2)]
    for t in threads:
        t.start()
    holding.wait()
    started = time.monotonic()
    with pytest.raises(PoolBusy, match="holds 2 of its 2"), pool.lease("a", timeout=0.2):
        pass
    assert 0.15 < time.monotonic() - started < 2
    started = time.monotonic()
    with pool.lease("b", timeout=0.2):
        assert time.monotonic() - started < 0.1
    release.set()
    for t in threads:
        t.join()
    # Connections are kept and reused: three made for three at once, none since.
    with pool.lease("a", timeout=0.1), pool.lease("a", timeout=0.1):
        pass
    assert len(made) == 3


def test_the_page_gate_keeps_a_tenant_to_its_share() -> None:
    gate = PageGate(capacity=4, share=2, poll_seconds=0.01)

    async def scenario() -> None:
        assert await gate.enter("a", 0.1) and await gate.enter("a", 0.1)
        started = time.monotonic()
        assert not await gate.enter("a", 0.1)
        assert time.monotonic() - started >= 0.1
        assert await gate.enter("b", 0.1)
        waiting = asyncio.ensure_future(gate.enter("a", 2))
        await asyncio.sleep(0.05)
        gate.leave("a")
        assert await waiting

    asyncio.run(scenario())
    assert gate.held("a") == 2 and gate.held("b") == 1


def test_a_page_deadline_follows_the_page_and_ends_with_it() -> None:
    assert time_left(7.0) == 7.0
    with page_deadline(2.0, now=100.0):
        assert time_left(9.0, now=100.5) == 1.5
        assert time_left(9.0, now=103.0) == -1.0
    assert time_left(7.0) == 7.0


def test_a_tenant_over_its_page_share_waits_then_gets_a_busy_page() -> None:
    api = FakeApi(TOKENS)
    api.jobs = {"a1": job("a1")}
    console = Console(api, FakeHistory(), clock=lambda: NOW, page_seconds=0.2, page_capacity=4)
    client = _signed_in(console, "tok-a")
    key = share_key(Credentials("tok-a", ""))
    for _ in range(2):
        assert console.pages.try_enter(key)  # two pages of alpha's in progress
    assert client.get("/jobs").status_code == 429
    other = _signed_in(console, "tok-b")
    assert other.get("/jobs").status_code == 200
    console.pages.leave(key)
    assert client.get("/jobs").status_code == 200


# --- sessions -------------------------------------------------------------------------------

def test_a_sign_in_flood_of_one_tenant_ends_only_its_own_sessions() -> None:
    store = SessionStore(max_sessions=10_000, per_tenant=100)
    beta = store.start(Credentials("tok-b", "beta"), NOW, open_mode=False)
    gamma = [store.start(Credentials("tok-c", "gamma"), NOW, open_mode=False) for _ in range(50)]
    alpha = Credentials("tok-a", "alpha")
    flood = [store.start(alpha, NOW + timedelta(seconds=i), open_mode=False)
             for i in range(10_000)]
    later = NOW + timedelta(hours=1)
    assert store.find(beta.session_id, later) is not None
    assert all(store.find(s.session_id, later) for s in gamma)
    assert store.count(share_key(alpha)) == 100
    # The newest hundred of alpha's are the ones left.
    assert all(store.find(s.session_id, later) for s in flood[-100:])
    assert store.find(flood[-101].session_id, later) is None


def test_past_the_total_the_tenant_holding_most_gives_way() -> None:
    store = SessionStore(max_sessions=10, per_tenant=6)
    b = [store.start(Credentials("tok-b", ""), NOW, False) for _ in range(4)]
    a = [store.start(Credentials("tok-a", ""), NOW + timedelta(seconds=i), False)
         for i in range(6)]
    assert len(store) == 10
    # Full: a new tenant's sign-in ends the oldest of the largest holder's (alpha, 6).
    c = store.start(Credentials("tok-c", ""), NOW, False)
    assert store.find(a[0].session_id, NOW) is None
    assert all(store.find(s.session_id, NOW) for s in [*b, c])
    # Alpha (5) and beta (4): alpha signing in again ends its own, never beta's.
    for _ in range(20):
        store.start(Credentials("tok-a", ""), NOW, False)
    assert all(store.find(s.session_id, NOW) for s in [*b, c])
    assert store.count(share_key(Credentials("tok-a", ""))) == 5


def test_sessions_still_expire_and_end() -> None:
    store = SessionStore(idle_timeout=timedelta(hours=8), max_sessions=10, per_tenant=5)
    old = store.start(Credentials("tok-a", ""), NOW, False)
    kept = store.start(Credentials("tok-a", ""), NOW, False)
    assert store.find(kept.session_id, NOW + timedelta(hours=7)) is not None
    store.start(Credentials("tok-b", ""), NOW + timedelta(hours=9), False)
    assert store.find(old.session_id, NOW + timedelta(hours=9)) is None
    assert store.find(kept.session_id, NOW + timedelta(hours=9)) is not None
    store.end(kept.session_id)
    assert store.find(kept.session_id, NOW + timedelta(hours=9)) is None and len(store) == 1


def test_a_share_is_the_token_or_in_open_mode_the_picked_tenant() -> None:
    assert share_key(Credentials("tok-a", "")) == share_key(Credentials("tok-a", "alpha"))
    assert share_key(Credentials("tok-a", "")) != share_key(Credentials("tok-b", ""))
    assert "tok-a" not in share_key(Credentials("tok-a", ""))
    assert share_key(Credentials(None, "alpha")) == "tenant:alpha"


def _signed_in(console: Console, token: str) -> TestClient:
    client = TestClient(build_app(console), base_url=BASE, follow_redirects=False)
    page = client.get("/signin")
    answer = client.post("/signin", data={"csrf": csrf_of(page.text), "token": token})
    assert answer.status_code == 303, answer.text
    return client


def test_through_the_web_a_sign_in_flood_leaves_another_tenants_session_valid() -> None:
    api = FakeApi(TOKENS)
    api.jobs = {"b1": job("b1", "beta")}
    console = Console(api, FakeHistory(), clock=lambda: NOW,
                      sessions=SessionStore(max_sessions=50, per_tenant=10))
    beta = _signed_in(console, "tok-b")
    flood = TestClient(build_app(console), base_url=BASE, follow_redirects=False)
    csrf = csrf_of(flood.get("/signin").text)
    for _ in range(200):
        assert flood.post("/signin", data={"csrf": csrf, "token": "tok-a"}).status_code == 303
        flood.cookies.delete("cronlog_session")
        flood.cookies.set("cronlog_signin_csrf", csrf)
    assert len(console.sessions) == 11
    page = beta.get("/jobs")
    assert page.status_code == 200 and "b1" in page.text


# --- Host names, cookies, refused sign-ins ---------------------------------------------------

def test_only_the_allowed_host_names_are_answered() -> None:
    api = FakeApi(TOKENS)
    console = Console(api, FakeHistory(), clock=lambda: NOW)
    for base in (BASE, "http://localhost:8080", "http://[::1]:8080"):
        client = TestClient(build_app(console), base_url=base, follow_redirects=False)
        assert client.get("/signin").status_code == 200, base
    for host in ("evil.example", "evil.example:8080", "127.0.0.1.evil.example", "", "[::1]x"):
        client = TestClient(build_app(console), base_url=BASE, follow_redirects=False)
        answer = client.get("/signin", headers={"host": host})
        assert answer.status_code == 421, host
        assert "csrf" not in answer.text
    # A probe by address still finds /healthz.
    client = TestClient(build_app(console), base_url="http://10.0.0.5:8080")
    assert client.get("/healthz").status_code == 200
    named = Console(api, FakeHistory(), clock=lambda: NOW,
                    allowed_hosts=parse_hosts("console.example.com"))
    client = TestClient(build_app(named), base_url="https://console.example.com")
    assert client.get("/signin").status_code == 200
    assert TestClient(build_app(named), base_url=BASE).get("/signin").status_code == 421


def test_host_names_parse_and_compare() -> None:
    assert parse_hosts(" Console.Example.COM., 10.0.0.5,[::1] ") == (
        "console.example.com", "10.0.0.5", "::1")
    for bad in ("console.example.com:443", "https://console", "*.example.com", ",", "a b"):
        with pytest.raises(ValueError):
            parse_hosts(bad)
    allowed = ("localhost", "127.0.0.1", "::1")
    assert host_allowed("LocalHost:38080", allowed) and host_allowed("[::1]:1", allowed)
    assert not host_allowed(None, allowed) and not host_allowed("127.0.0.1:x", allowed)


def test_cookies_are_secure_whenever_the_console_is_remote() -> None:
    assert not secure_cookie(Settings())
    assert secure_cookie(Settings(console_secure_cookie=True))
    remote = Settings(console_address="0.0.0.0:8080", console_remote=True,
                      console_hosts=("console.example.com",))
    assert secure_cookie(remote)
    console = console_for(remote, FakeApi(TOKENS), FakeHistory())
    client = TestClient(build_app(console), base_url="https://console.example.com",
                        follow_redirects=False)
    page = client.get("/signin")
    assert "secure" in page.headers["set-cookie"].lower()
    answer = client.post("/signin", data={"csrf": csrf_of(page.text), "token": "tok-a"},
                         headers={"origin": "https://console.example.com"})
    cookie = answer.headers["set-cookie"].lower()
    assert answer.status_code == 303 and "secure" in cookie and "httponly" in cookie
    local = TestClient(build_app(console_for(Settings(), FakeApi(TOKENS), FakeHistory())),
                       base_url=BASE)
    assert "secure" not in local.get("/signin").headers["set-cookie"].lower()


def test_a_remote_console_must_name_its_hosts() -> None:
    with pytest.raises(ConfigError, match="CRONLOG_CONSOLE_HOSTS"):
        check_console_hosts("0.0.0.0:8080", Settings().console_hosts)
    check_console_hosts("0.0.0.0:8080", ("console.example.com",))
    check_console_hosts("127.0.0.1:8080", Settings().console_hosts)


def test_refused_sign_ins_are_logged_at_a_bounded_rate(caplog: pytest.LogCaptureFixture) -> None:
    clock = [0.0]
    console = Console(FakeApi(TOKENS), FakeHistory(), clock=lambda: NOW,
                      refusal_log=LogRate(limit=3, interval=60, clock=lambda: clock[0]))
    client = TestClient(build_app(console), base_url=BASE, follow_redirects=False)
    csrf = csrf_of(client.get("/signin").text)
    with caplog.at_level(logging.INFO, logger="cronlog.infra.console.app"):
        for _ in range(300):
            answer = client.post("/signin", data={"csrf": csrf, "token": "guess"})
            assert answer.status_code == 401
            client.cookies.set("cronlog_signin_csrf", csrf_of(answer.text))
            csrf = csrf_of(answer.text)
        clock[0] = 60.0
        client.post("/signin", data={"csrf": csrf, "token": "guess"})
    lines = [r.getMessage() for r in caplog.records if "refused a sign-in" in r.getMessage()]
    assert len(lines) == 4 and "297 more like it not logged" in lines[-1]
    assert all("guess" not in line for line in lines)


# --- settings -------------------------------------------------------------------------------

def test_console_settings_default_parse_and_pass_through() -> None:
    d = settings_from_env({})
    assert d.console_hosts == ("localhost", "127.0.0.1", "::1")
    assert (d.console_page_seconds, d.console_history_connections, d.console_tenant_share,
            d.console_tenant_sessions) == (5.0, 4, 0.5, 100)
    given = settings_from_env({"CRONLOG_CONSOLE_HOSTS": "console.example.com,127.0.0.1",
                               "CRONLOG_CONSOLE_PAGE_SECONDS": "2.5",
                               "CRONLOG_CONSOLE_HISTORY_CONNECTIONS": "8",
                               "CRONLOG_CONSOLE_TENANT_SHARE": "0.25",
                               "CRONLOG_CONSOLE_TENANT_SESSIONS": "20"})
    assert given.console_hosts == ("console.example.com", "127.0.0.1")
    assert (given.console_page_seconds, given.console_history_connections,
            given.console_tenant_share, given.console_tenant_sessions) == (2.5, 8, 0.25, 20)
    for settings in (d, given):
        again = settings_from_env(settings_env(settings))
        assert (again.console_hosts, again.console_page_seconds,
                again.console_history_connections, again.console_tenant_share,
                again.console_tenant_sessions) == (
            settings.console_hosts, settings.console_page_seconds,
            settings.console_history_connections, settings.console_tenant_share,
            settings.console_tenant_sessions)


@pytest.mark.parametrize("name, raw", [
    ("CONSOLE_HOSTS", "console.example.com:443"), ("CONSOLE_HOSTS", "*"),
    ("CONSOLE_PAGE_SECONDS", "0"), ("CONSOLE_PAGE_SECONDS", "61"),
    ("CONSOLE_PAGE_SECONDS", "nan"), ("CONSOLE_PAGE_SECONDS", "soon"),
    ("CONSOLE_HISTORY_CONNECTIONS", "0"), ("CONSOLE_HISTORY_CONNECTIONS", "four"),
    ("CONSOLE_TENANT_SHARE", "0"), ("CONSOLE_TENANT_SHARE", "1.5"),
    ("CONSOLE_TENANT_SESSIONS", "-1"),
])
def test_bad_console_settings_are_refused_by_name(name: str, raw: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings_from_env({"CRONLOG_" + name: raw})
    assert str(error.value).startswith(f"CRONLOG_{name}: "), error.value


def test_the_apis_mode_is_asked_at_most_every_probe_interval() -> None:
    """Each sign-in page asks whether the api has tokens; with tokens on, each asking is a
    refused call in the api's log. Asked once per PROBE_SECONDS instead."""
    import grpc

    from cronlog.client import CronlogClient
    from cronlog.infra.console import grpc_api

    class Refused(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.UNAUTHENTICATED

        def details(self) -> str:
            return "missing bearer token"

        def trailing_metadata(self) -> tuple[()]:
            return ()

    calls: list[float] = []

    class Stub:
        def ListJobs(self, request: object, timeout: float, metadata: object) -> object:
            calls.append(timeout)
            raise Refused()

    now = [0.0]
    client = CronlogClient(stub=Stub())  # type: ignore[arg-type]
    api = grpc_api.GrpcJobsApi(client, monotonic=lambda: now[0])
    assert [api.probe_open() for _ in range(1_000)] == [False] * 1_000
    assert len(calls) == 1
    now[0] = grpc_api.PROBE_SECONDS
    assert not api.probe_open() and len(calls) == 2
    # A read inside a page gets what is left of the page's limit, at least half a second.
    with page_deadline(2.0, now=time.monotonic()):
        now[0] += grpc_api.PROBE_SECONDS
        api.probe_open()
    assert 1.0 < calls[-1] <= 2.0
    with page_deadline(0.0):
        now[0] += grpc_api.PROBE_SECONDS
        api.probe_open()
    assert calls[-1] == grpc_api.LEAST_READ_TIMEOUT
