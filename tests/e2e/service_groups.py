"""Services several e2e modules share, each a `ServiceGroup` a module names as its `SERVICE`.

Every service a module starts costs the suite a provision (topics, two databases) and four
processes' start and stop: on 2 cores, about as much CPU as a short module's tests. Modules
whose settings fit together therefore share one: the group's settings are the union of what
each of them needs, and each module isolates itself as on the default shared service (its
own tenants, job names and request ids). A module whose settings conflict with a group's, or
that stops processes or counts everything a service holds, keeps a service of its own
(tests/e2e/conftest.py)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from cronlog.domain.limits import TenantLimit, TenantLimits

ALL_ROLES = ("api", "scheduler", "worker", "projector")


@dataclass(frozen=True, eq=False)
class ServiceGroup:
    """One service for every module that names this group (compared by identity)."""

    name: str
    overrides: dict[str, object] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    roles: tuple[str, ...] = ALL_ROLES


# A tenant the declared queues' module locks to queue "batch" and handler "echo".
LOCKED_TENANT = "locked-" + uuid.uuid4().hex[:6]
# A tenant the tenant limits' module holds to two jobs and one run in flight.
SMALL_TENANT = "small-" + uuid.uuid4().hex[:6]

# The work the workers run: handlers of the tests' own (a stubborn one, 64 KiB outputs,
# heartbeating ones), commands, webhooks to loopback, declared queues and tenant limits.
WORK = ServiceGroup("work", overrides={
    "handler_modules": ("tests.e2e.stubborn_handler", "tests.e2e.large_output_handler"),
    "worker_handlers": ("tests.e2e.heartbeat_handlers",),
    # Heartbeats every second, so that a 4 s heartbeat timeout is kept by the worker's own.
    "heartbeat_interval": timedelta(seconds=1),
    "command_allow": ("/bin/echo", "/bin/sh"),
    # A command's group gets SIGKILL a second after SIGTERM, well within the worker's
    # cancel grace: the command handler's own escalation is what a test sees, not the
    # worker giving up on the attempt's thread.
    "command_grace_seconds": 1.0,
    "cancel_grace": timedelta(seconds=5),
    # The receivers of the http and channel tests are on loopback, which the outbound
    # fence refuses unless the operator allows it.
    "http_allow": ("127.0.0.1",),
    # "unserved" is declared but no worker consumes it; "batch" is served.
    "queues": ("default", "batch", "unserved"),
    "worker_queues": ("default", "batch"),
    "tenant_queues": {LOCKED_TENANT: ("batch",)},
    "tenant_handlers": {LOCKED_TENANT: ("echo",)},
    "tenant_limits": TenantLimits(overrides={SMALL_TENANT: TenantLimit(max_jobs=2,
                                                                       max_in_flight=1)}),
})

# Fire times more than 2 s late are misfires: the lifecycle and missed-range modules see
# their misfire policies within seconds.
QUICK_MISFIRES = ServiceGroup("quick-misfires",
                              overrides={"catch_up_window": timedelta(seconds=2)})
