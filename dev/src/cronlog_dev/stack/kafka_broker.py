"""The local Apache Kafka broker: jars resolved with Maven, KRaft single node on loopback."""

from __future__ import annotations

import base64
import importlib.resources
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from cronlog_dev.stack.process import (
    StackError,
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


@dataclass
class KafkaBroker:
    state_dir: Path
    port: int
    controller_port: int
    partitions: int = 8

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def _libs(self) -> Path:
        # Jars are shared by every state folder of this checkout's user: they never change
        # for a pinned version, and resolving them costs a Maven run.
        return Path.home() / ".cache" / "cronlog" / f"kafka-{KAFKA_VERSION}" / "libs"

    def install(self) -> None:
        marker = self._libs / ".complete"
        if marker.exists():
            return
        if shutil.which("mvn") is None:
            raise StackError("Maven (mvn) is needed to fetch the Kafka broker jars")
        pom = self.state_dir / "kafka-pom.xml"
        pom.parent.mkdir(parents=True, exist_ok=True)
        pom.write_text(_resource("kafka-pom.xml"))
        self._libs.mkdir(parents=True, exist_ok=True)
        run_checked(
            ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
             f"-DoutputDirectory={self._libs}", "-DincludeScope=runtime"],
            "resolving the Kafka broker jars with Maven",
        )
        marker.write_text(KAFKA_VERSION)

    def _java(self, *args: str) -> list[str]:
        return ["java", "-Xms256m", "-Xmx768m",
                f"-Dlog4j2.configurationFile={self.state_dir / 'log4j2.yaml'}",
                "-cp", f"{self._libs}/*", *args]

    def start(self) -> None:
        self.install()
        pidfile = self.state_dir / "kafka.pid"
        stop_pidfile(pidfile)
        if port_open(self.port):
            raise StackError(f"port {self.port} is taken by another process; cannot start Kafka")
        data = self.state_dir / "kafka-data"
        props = self.state_dir / "server.properties"
        (self.state_dir / "log4j2.yaml").write_text(_LOG4J2)
        props.write_text(
            _resource("kafka-server.properties").format(
                port=self.port, controller_port=self.controller_port,
                log_dir=data, partitions=self.partitions,
            )
        )
        if not (data / "meta.properties").exists():
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            # "=" form: a base64 id may start with "-", which would read as an option.
            run_checked(self._java("kafka.tools.StorageTool", "format",
                                   f"--cluster-id={cluster_id}", f"--config={props}"),
                        "formatting Kafka storage")
        log = self.state_dir / "kafka.log"
        env = dict(os.environ)
        spawn(self._java("kafka.Kafka", str(props)), log, pidfile, env=env)
        wait_until(lambda: port_open(self.port), 90, "Kafka broker", log)

    def stop(self) -> None:
        stop_pidfile(self.state_dir / "kafka.pid")
