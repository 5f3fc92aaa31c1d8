"""Tenant tokens from configuration, and what the auth interceptor does with a call."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from cronlog.infra.config import ConfigError
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.config_tenants import parse_tenant_tokens_file, parse_tenant_tokens_list
from cronlog.infra.grpc import auth

TOKENS = auth.TokenTable([("alpha", "alpha-secret-1"), ("alpha", "alpha-secret-2"),
                          ("beta", "beta-secret")])
JOBS = "/cronlog.v1.JobService/ListJobs"


# --- configuration ---------------------------------------------------------------------

def test_tokens_file_skips_blank_and_comment_lines() -> None:
    text = "# rotated 2024-05\n\nalpha  alpha-secret\n  # old:\nbeta\tb#eta=secret\n"
    assert parse_tenant_tokens_file(text, "tokens") == [("alpha", "alpha-secret"),
                                                         ("beta", "b#eta=secret")]


@pytest.mark.parametrize(("text", "problem"), [
    ("alpha secret\nbeta\n", "line 2: expected 'tenant token', got 1 fields"),
    ("alpha secret\n\nbeta s3cret # note\n", "line 3: expected 'tenant token', got 4 fields"),
    ("al/pha s3cret\n", "line 1: tenant 'al/pha' must match"),
])
def test_a_bad_tokens_file_line_is_named_without_its_token(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_tenant_tokens_file(text, "tokens.txt")
    assert f"tokens.txt {problem}" in str(error.value)
    assert "s3cret" not in str(error.value)


def test_token_list_splits_on_the_first_equals_sign() -> None:
    assert parse_tenant_tokens_list(" alpha=a-secret==, beta=b=c ,", "ENV") == [
        ("alpha", "a-secret=="), ("beta", "b=c")]


@pytest.mark.parametrize(("text", "problem"), [
    ("alpha=a,beta", "ENV entry 2: expected 'tenant=token'"),
    ("alpha=", "ENV entry 1: the token of tenant 'alpha' must be non-empty"),
    ("=s3cret", "ENV entry 1: tenant '' must match"),
    ("alpha=s3c ret", "ENV entry 1: the token of tenant 'alpha' must be non-empty, without "
                      "whitespace"),
])
def test_a_bad_token_list_entry_is_named_without_its_token(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_tenant_tokens_list(text, "ENV")
    assert problem in str(error.value)
    assert "s3c" not in str(error.value)


def test_settings_merge_the_tokens_file_and_the_list(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("alpha alpha-secret\n")
    settings = settings_from_env({"CRONLOG_TENANT_TOKENS_FILE": str(path),
                                  "CRONLOG_TENANT_TOKENS": "beta=beta-secret,alpha=alpha-secret"})
    assert settings.tenant_tokens == (("alpha", "alpha-secret"), ("beta", "beta-secret"))
    assert "secret" not in repr(settings)


def test_no_tokens_configured_means_open_mode() -> None:
    assert settings_from_env({}).tenant_tokens == ()
    assert not auth.TokenTable(settings_from_env({}).tenant_tokens)


def test_one_token_for_two_tenants_is_refused() -> None:
    with pytest.raises(ConfigError, match="tenants 'alpha' and 'beta' have the same token"):
        settings_from_env({"CRONLOG_TENANT_TOKENS": "alpha=shared,beta=shared"})


def test_an_unreadable_tokens_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=f"CRONLOG_TENANT_TOKENS_FILE {missing}: cannot read"):
        settings_from_env({"CRONLOG_TENANT_TOKENS_FILE": str(missing)})


def test_tls_needs_both_certificate_and_key() -> None:
    with pytest.raises(ConfigError, match="must be set together"):
        settings_from_env({"CRONLOG_TLS_CERT": "cert.pem"})
    settings = settings_from_env({"CRONLOG_TLS_CERT": "cert.pem", "CRONLOG_TLS_KEY": "key.pem"})
    assert (settings.tls_cert, settings.tls_key) == ("cert.pem", "key.pem")


# --- tokens and decisions --------------------------------------------------------------

def test_a_token_maps_to_its_tenant_and_nothing_else_does() -> None:
    assert TOKENS.tenant_for("alpha-secret-1") == "alpha"
    assert TOKENS.tenant_for("alpha-secret-2") == "alpha"
    assert TOKENS.tenant_for("beta-secret") == "beta"
    for wrong in ("", "beta-secre", "beta-secret ", "BETA-SECRET", "alpha-secret-1x", "ünï"):
        assert TOKENS.tenant_for(wrong) is None, wrong


@pytest.mark.parametrize(("metadata", "token"), [
    ((("authorization", "Bearer abc"),), "abc"),
    ((("x-other", "1"), ("authorization", "bearer  abc ")), "abc"),
    ((("Authorization", "BEARER abc"),), "abc"),
    ((), None),
    (None, None),
    ((("authorization", "Basic abc"),), None),
    ((("authorization", "Bearer"),), None),
    ((("authorization", "Bearer "),), None),
    ((("authorization", "abc"),), None),
    ((("authorization", b"Bearer abc"),), None),
    # Two credentials are ambiguous: which tenant would the call be?
    ((("authorization", "Bearer abc"), ("authorization", "Bearer def")), None),
])
def test_bearer_token_from_metadata(metadata: Any, token: str | None) -> None:
    assert auth.bearer_token(metadata) == token


def test_decisions() -> None:
    bearer = (("authorization", "Bearer beta-secret"),)
    assert auth.decide(JOBS, bearer, TOKENS) == auth.Decision(tenant="beta")
    missing = auth.decide(JOBS, (), TOKENS)
    assert missing.rejected and "missing bearer token" in missing.reason
    unknown = auth.decide(JOBS, (("authorization", "Bearer nope"),), TOKENS)
    assert unknown.rejected and unknown.reason == "unknown bearer token"
    for public in ("/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch",
                   "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                   "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"):
        assert auth.decide(public, (), TOKENS) == auth.Decision(), public
    # Only the exact service names are public, not look-alikes.
    assert auth.decide("/grpc.health.v1.HealthX/Check", (), TOKENS).rejected


# --- the interceptor -------------------------------------------------------------------

class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, details)
        self.code = code
        self.details = details


class FakeContext:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:1234"

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


@dataclass
class CallDetails:
    method: str
    invocation_metadata: tuple[tuple[str, str], ...] = ()


@dataclass
class Servicer:
    """Records the tenant each call ran as."""

    seen: list[str | None] = field(default_factory=list)

    def unary(self, request: bytes, context: object) -> bytes:
        self.seen.append(auth.caller_tenant())
        return request

    def streaming(self, request: bytes, context: object) -> Iterator[bytes]:
        for _ in range(2):
            self.seen.append(auth.caller_tenant())
            yield request


def intercept(details: CallDetails, handler: grpc.RpcMethodHandler[Any, Any] | None
              ) -> grpc.RpcMethodHandler[Any, Any] | None:
    return auth.TenantAuthInterceptor(TOKENS).intercept_service(
        lambda _d: handler, details)  # type: ignore[arg-type]


def test_an_accepted_call_runs_as_its_tenant_and_only_during_the_call() -> None:
    servicer = Servicer()
    original = grpc.unary_unary_rpc_method_handler(servicer.unary, bytes, bytes)
    handler = intercept(CallDetails(JOBS, (("authorization", "Bearer alpha-secret-2"),)),
                        original)
    assert handler is not None and handler.unary_unary is not None
    assert (handler.request_deserializer, handler.response_serializer) == (bytes, bytes)
    assert handler.unary_unary(b"x", FakeContext()) == b"x"  # type: ignore[arg-type]
    assert servicer.seen == ["alpha"]
    assert auth.caller_tenant() is None


def test_a_streaming_call_keeps_its_tenant_while_it_yields() -> None:
    servicer = Servicer()
    original = grpc.unary_stream_rpc_method_handler(servicer.streaming)
    handler = intercept(CallDetails(JOBS, (("authorization", "Bearer beta-secret"),)), original)
    assert handler is not None and handler.unary_stream is not None
    assert list(handler.unary_stream(b"y", FakeContext())) == [b"y", b"y"]  # type: ignore[arg-type]
    assert servicer.seen == ["beta", "beta"]


@pytest.mark.parametrize("metadata", [(), (("authorization", "Bearer beta-secret!"),),
                                      (("authorization", "beta-secret"),)])
def test_a_rejected_call_never_reaches_the_servicer(metadata: tuple[tuple[str, str], ...]
                                                     ) -> None:
    servicer = Servicer()
    for original in (grpc.unary_unary_rpc_method_handler(servicer.unary),
                     grpc.unary_stream_rpc_method_handler(servicer.streaming)):
        handler = intercept(CallDetails(JOBS, metadata), original)
        assert handler is not None
        with pytest.raises(Aborted) as aborted:
            if handler.unary_unary is not None:
                handler.unary_unary(b"x", FakeContext())  # type: ignore[arg-type]
            else:
                assert handler.unary_stream is not None
                list(handler.unary_stream(b"x", FakeContext()))  # type: ignore[arg-type]
        assert aborted.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert servicer.seen == []


def test_health_and_reflection_pass_untouched_and_unknown_methods_stay_unknown() -> None:
    original = grpc.unary_unary_rpc_method_handler(Servicer().unary)
    assert intercept(CallDetails("/grpc.health.v1.Health/Check"), original) is original
    assert intercept(CallDetails(JOBS), None) is None


def test_an_interceptor_without_tokens_is_a_configuration_mistake() -> None:
    with pytest.raises(ValueError):
        auth.TenantAuthInterceptor(auth.TokenTable([]))
