"""The local Apache Kafka broker: jars resolved with Maven, KRaft single node on loopback.
A node of a local cluster (kafka_cluster.py) is the same process with another
server.properties."""

from __future__ import annotations

import base64
import contextlib
import importlib.resources
import os
import shutil
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from cronlog_dev.stack.install_once import cache_root, install_once
from cronlog_dev.stack.process import (
    StackError,
    pid_alive,
    port_open,
    run_checked,
    spawn,
    stop_pidfile,
    wait_until,
)

KAFKA_VERSION = "4.1.1"

_LOG4J2 = """Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
"""


def _resource(name: str) -> str:
    return importlib.resources.files("cronlog_dev.stack").joinpath(name).read_text()


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def kafka_libs() -> Path:
    # Jars are shared by every state folder of the cache: they never change for a pinned
    # version, and resolving them costs a Maven run.
    return cache_root() / f"kafka-{KAFKA_VERSION}" / "libs"


def install_kafka_jars() -> Path:
    """The Kafka broker's jars, resolved with Maven once however many launchers ask at the
    same time (install_once.py); Maven's own repository is kept in the cache too, so a
    fresh cache is a fresh install, whatever the user's ~/.m2 holds."""
    if shutil.which("mvn") is None:
        raise StackError("Maven (mvn) is needed to fetch the Kafka broker jars")

    def resolve(folder: Path) -> None:
        pom = folder.parent / f".kafka-pom-{folder.name}.xml"
        pom.write_text(_resource("kafka-pom.xml"))
        try:
            run_checked(
                ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                 f"-DoutputDirectory={folder}", "-DincludeScope=runtime",
                 f"-Dmaven.repo.local={cache_root() / 'maven-repository'}"],
                "resolving the Kafka broker jars with Maven",
            )
        finally:
            pom.unlink(missing_ok=True)

    return install_once(kafka_libs(), resolve, f"Kafka {KAFKA_VERSION} jars")


def write_log_config(state_dir: Path) -> None:
    (state_dir / "log4j2.yaml").write_text(_LOG4J2)


# A local broker lives minutes to hours under light load, and its optimising compiler (C2)
# spent about 40% of its CPU compiling (a test broker: 24 of 66 CPU-seconds; docs/
# development.md); on 2 cores shared by a whole test session that is time every suite waits.
# C1 alone compiles quickly and runs a lightly loaded broker as well. The bench, which loads
# Kafka for minutes and measures its cost, keeps the full tiered compilation.
QUICK_JIT = ("-XX:TieredStopAtLevel=1",)


def kafka_java(state_dir: Path, heap_mb: int, *args: str,
               optimising_jit: bool = False) -> list[str]:
    """A java command line on the Kafka jars, logging as write_log_config set up."""
    return ["java", "-Xms256m", f"-Xmx{heap_mb}m", *(() if optimising_jit else QUICK_JIT),
            f"-Dlog4j2.configurationFile={state_dir / 'log4j2.yaml'}",
            "-cp", f"{kafka_libs()}/*", *args]


@dataclass
class KafkaBroker:
    state_dir: Path
    port: int
    controller_port: int
    partitions: int = 8
    # A cluster's nodes run three of these beside the rest of the stack on 2 cores.
    heap_mb: int = 768
    # C2 as well as C1 (QUICK_JIT): the bench's.
    optimising_jit: bool = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def install(self) -> None:
        install_kafka_jars()

    def _java(self, *args: str) -> list[str]:
        return kafka_java(self.state_dir, self.heap_mb, *args,
                          optimising_jit=self.optimising_jit)

    @property
    def pidfile(self) -> Path:
        return self.state_dir / "kafka.pid"

    @property
    def log(self) -> Path:
        return self.state_dir / "kafka.log"

    def _properties(self, data: Path) -> str:
        return _resource("kafka-server.properties").format(
            port=self.port, controller_port=self.controller_port,
            log_dir=data, partitions=self.partitions,
        )

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self, cluster_id: str | None = None) -> None:
        """Formats the storage on first use (with cluster_id, or a new one) and starts the
        process without waiting for it; a cluster's nodes can only become ready together."""
        self.install()
        stop_pidfile(self.pidfile)
        if port_open(self.port):
            raise StackError(f"port {self.port} is taken by another process; cannot start Kafka")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        data = self.state_dir / "kafka-data"
        props = self.state_dir / "server.properties"
        write_log_config(self.state_dir)
        props.write_text(self._properties(data))
        if not (data / "meta.properties").exists():
            # "=" form: a base64 id may start with "-", which would read as an option.
            run_checked(self._java("kafka.tools.StorageTool", "format",
                                   f"--cluster-id={cluster_id or new_cluster_id()}",
                                   f"--config={props}"),
                        "formatting Kafka storage")
        spawn(self._java("kafka.Kafka", str(props)), self.log, self.pidfile, env=dict(os.environ))

    def wait_ready(self, timeout: float = 90) -> None:
        def ready() -> bool:
            if self.pid is None:
                raise KafkaExited(f"Kafka broker {self.bootstrap} exited while starting; "
                                  f"see {self.log}\n{log_tail(self.log)}")
            return port_open(self.port)
        wait_until(ready, timeout, f"Kafka broker {self.bootstrap}", self.log)

    @property
    def pid(self) -> int | None:
        """The running broker's pid, or None when it is not running."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if pid_alive(pid) and not _reaped(pid) else None

    def kill(self) -> None:
        """kill -9, as a crash would: no controlled shutdown, no leadership handed over."""
        pid = self.pid
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and not _reaped(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.pidfile.unlink(missing_ok=True)

    def stop(self) -> None:
        stop_pidfile(self.pidfile)


class KafkaExited(StackError):
    """The broker process ended before it served."""


def log_tail(log: Path, lines: int = 20) -> str:
    if not log.exists():
        return ""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _reaped(pid: int) -> bool:
    """Reaps pid if it is a dead child of this process; True if it was (a zombie still
    answers kill 0)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid
