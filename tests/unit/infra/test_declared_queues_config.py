"""CRONLOG_QUEUES, CRONLOG_WORKER_QUEUES, the tenant allow-lists and the default instance id."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cronlog.infra.config import ConfigError, Settings, default_instance_id
from cronlog.infra.config_env import settings_from_env
from cronlog_dev.processes import settings_env


def test_defaults_declare_and_serve_the_default_queue() -> None:
    settings = settings_from_env({})
    assert settings.queues == ("default",)
    assert settings.served_queues == ("default",)
    assert settings.tenant_queues == {} and settings.tenant_handlers == {}


def test_declared_queues_and_a_worker_serving_some_of_them() -> None:
    settings = settings_from_env({"CRONLOG_QUEUES": " default, batch ,gpu,batch",
                                  "CRONLOG_WORKER_QUEUES": "gpu"})
    assert settings.queues == ("default", "batch", "gpu")
    assert settings.served_queues == ("gpu",)
    assert settings_from_env({"CRONLOG_QUEUES": "a,b"}).served_queues == ("a", "b")


def test_tenant_allow_lists() -> None:
    settings = settings_from_env({
        "CRONLOG_QUEUES": "default,batch",
        "CRONLOG_TENANT_QUEUES": "acme:default|batch, beta:batch",
        "CRONLOG_TENANT_HANDLERS": "acme:echo|http,beta:my.module:handler"})
    assert settings.tenant_queues == {"acme": ("default", "batch"), "beta": ("batch",)}
    assert settings.tenant_handlers == {"acme": ("echo", "http"),
                                        "beta": ("my.module:handler",)}


@pytest.mark.parametrize(("env", "problem"), [
    ({"CRONLOG_QUEUES": "default,no spaces"}, "CRONLOG_QUEUES: 'no spaces' must match"),
    ({"CRONLOG_WORKER_QUEUES": "batch"}, "CRONLOG_WORKER_QUEUES: batch not declared"),
    ({"CRONLOG_TENANT_QUEUES": "acme:batch"}, "tenant 'acme' lists batch, not declared"),
    ({"CRONLOG_TENANT_QUEUES": "acme"}, "entry 1: expected 'tenant:name|name...'"),
    ({"CRONLOG_TENANT_QUEUES": "acme:"}, "tenant 'acme' lists nothing"),
    ({"CRONLOG_TENANT_QUEUES": "acme:default,acme:default"}, "'acme' is listed twice"),
    ({"CRONLOG_TENANT_QUEUES": "a b:default"}, "expected 'tenant:name|name...'"),
    ({"CRONLOG_TENANT_HANDLERS": "acme:echo|bad handler"}, "'bad handler' must match"),
])
def test_bad_queue_configuration_is_named(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings_from_env(env)
    assert problem in str(error.value)


def test_make_run_passes_queues_and_allow_lists_to_its_processes() -> None:
    settings = Settings(queues=("default", "batch"), worker_queues=("batch",),
                        tenant_queues={"acme": ("batch",)},
                        tenant_handlers={"acme": ("echo", "http")})
    again = settings_from_env(settings_env(settings))
    assert again.queues == settings.queues
    assert again.served_queues == ("batch",)
    assert again.tenant_queues == settings.tenant_queues
    assert again.tenant_handlers == settings.tenant_handlers
    assert again.api_open is False


def test_the_default_instance_id_differs_per_process_and_per_call() -> None:
    code = "from cronlog.infra.config_env import settings_from_env; print(settings_from_env({}).instance_id)"
    ids = {subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True).stdout.strip() for _ in range(2)}
    assert len(ids) == 2 and all(i.startswith("scheduler-") for i in ids)
    assert default_instance_id() != default_instance_id()
    assert Settings().instance_id != Settings().instance_id


def test_an_explicit_instance_id_is_kept_and_an_empty_one_means_the_default() -> None:
    assert settings_from_env({"CRONLOG_INSTANCE_ID": "sched-a"}).instance_id == "sched-a"
    assert settings_from_env({"CRONLOG_INSTANCE_ID": ""}).instance_id.startswith("scheduler-")


def test_shared_queues_and_handlers_default_to_the_default_queue_and_the_built_ins() -> None:
    from cronlog.infra.config import BUILT_IN_HANDLER_NAMES
    from cronlog.worker.built_in_handlers import BUILT_IN_HANDLERS

    # All but `command`: it runs programs on the worker's host, shared only when operators say.
    assert set(BUILT_IN_HANDLER_NAMES) == set(BUILT_IN_HANDLERS) - {"command"}
    settings = settings_from_env({})
    assert settings.shared_queues == ("default",)
    assert settings.shared_handlers == BUILT_IN_HANDLER_NAMES
    # No queue named default declared: none shared unless the operator says.
    assert settings_from_env({"CRONLOG_QUEUES": "batch"}).shared_queues == ()


def test_shared_queues_and_handlers_from_the_environment() -> None:
    settings = settings_from_env({"CRONLOG_QUEUES": "default,batch,gpu",
                                  "CRONLOG_SHARED_QUEUES": "batch, default",
                                  "CRONLOG_SHARED_HANDLERS": "echo,my.module:handler"})
    assert settings.shared_queues == ("batch", "default")
    assert settings.shared_handlers == ("echo", "my.module:handler")
    nothing = settings_from_env({"CRONLOG_SHARED_QUEUES": "-", "CRONLOG_SHARED_HANDLERS": "-"})
    assert nothing.shared_queues == () and nothing.shared_handlers == ()
    for shared in (("default",), ()):
        again = settings_from_env(settings_env(Settings(shared_queues=shared,
                                                        shared_handlers=shared and ("echo",))))
        assert again.shared_queues == shared
        assert again.shared_handlers == (shared and ("echo",))


@pytest.mark.parametrize(("env", "problem"), [
    ({"CRONLOG_SHARED_QUEUES": "gpu"}, "CRONLOG_SHARED_QUEUES: gpu not declared in"),
    ({"CRONLOG_SHARED_QUEUES": "no spaces here"}, "CRONLOG_SHARED_QUEUES: 'no spaces here'"),
    ({"CRONLOG_SHARED_HANDLERS": "bad handler"}, "CRONLOG_SHARED_HANDLERS: 'bad handler'"),
])
def test_bad_shared_lists_are_named(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings_from_env(env)
    assert problem in str(error.value)
