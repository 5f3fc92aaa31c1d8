"""A Kafka broker that takes only SASL/SCRAM over TLS (SASL_SSL, SCRAM-SHA-512), for the test
that runs cronlog as it would run against a secured production cluster. Its certificate
authority, certificate and SCRAM users are made when it is first started, in its state folder.

KRaft single node on loopback like the local stack's broker (same jars): clients and the
broker's own inter-broker connections use the SASL_SSL listener, each as its own SCRAM user;
only the controller listener, bound to loopback and used by the node itself, is plaintext."""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from cronlog_dev.stack.kafka_broker import (
    install_kafka_jars,
    kafka_java,
    new_cluster_id,
    write_log_config,
)
from cronlog_dev.stack.process import (
    StackError,
    port_open,
    run_checked,
    spawn,
    stop_pidfile,
    wait_until,
)

MECHANISM = "SCRAM-SHA-512"

_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=SASL_SSL://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=SASL_SSL
sasl.enabled.mechanisms={mechanism}
sasl.mechanism.inter.broker.protocol={mechanism}
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=\
org.apache.kafka.common.security.scram.ScramLoginModule required \
username="{broker_user}" password="{broker_password}";
ssl.keystore.type=PEM
ssl.keystore.location={keystore}
ssl.truststore.type=PEM
ssl.truststore.location={ca_file}
ssl.client.auth=none
log.dirs={log_dir}
num.partitions={partitions}
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.segment.bytes=67108864
transaction.max.timeout.ms=900000
"""

_LEAF_EXTENSIONS = """\
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=IP:127.0.0.1,DNS:localhost
"""


@dataclass(frozen=True)
class TlsFiles:
    ca_file: Path
    # The broker's private key (PKCS#8, unencrypted: the folder is the user's alone) and its
    # certificate, in the one PEM file Kafka's PEM keystore reads.
    keystore: Path


def make_tls_files(folder: Path) -> TlsFiles:
    """A throwaway certificate authority and a certificate it signs for 127.0.0.1 and
    localhost, valid for two days, made with the openssl command."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    ca_key, ca_file = folder / "ca.key", folder / "ca.pem"
    key, csr, cert = folder / "broker.key", folder / "broker.csr", folder / "broker.pem"
    extensions = folder / "broker.ext"
    extensions.write_text(_LEAF_EXTENSIONS)
    run_checked(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                 "-keyout", str(ca_key), "-out", str(ca_file), "-subj", "/CN=cronlog test CA",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
                "making the test certificate authority")
    run_checked(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                 "-out", str(csr), "-subj", "/CN=127.0.0.1"], "making the broker's key")
    run_checked(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_file),
                 "-CAkey", str(ca_key), "-CAcreateserial", "-days", "2",
                 "-extfile", str(extensions), "-out", str(cert)],
                "signing the broker's certificate")
    keystore = folder / "broker-keystore.pem"
    keystore.write_text(key.read_text() + cert.read_text())
    os.chmod(keystore, 0o600)
    return TlsFiles(ca_file=ca_file, keystore=keystore)


@dataclass
class SecuredKafkaBroker:
    state_dir: Path
    port: int
    controller_port: int
    # The SCRAM user cronlog connects as, made when the storage is formatted.
    user: str = "cronlog"
    password: str = field(default_factory=lambda: secrets.token_hex(16), repr=False)
    partitions: int = 4
    heap_mb: int = 512

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def tls(self) -> TlsFiles:
        return TlsFiles(ca_file=self.state_dir / "tls" / "ca.pem",
                        keystore=self.state_dir / "tls" / "broker-keystore.pem")

    def client_config(self) -> tuple[tuple[str, str], ...]:
        """The librdkafka settings a client of this broker needs (CRONLOG_KAFKA_CONFIG)."""
        return (("security.protocol", "SASL_SSL"), ("sasl.mechanism", MECHANISM),
                ("sasl.username", self.user), ("sasl.password", self.password),
                ("ssl.ca.location", str(self.tls.ca_file)))

    @property
    def _pidfile(self) -> Path:
        return self.state_dir / "kafka.pid"

    def _java(self, *args: str) -> list[str]:
        return kafka_java(self.state_dir, self.heap_mb, *args)

    def start(self) -> None:
        """Starts from a fresh state folder each time: the users and their passwords are made
        at format time, so a folder left by an earlier start would hold other ones."""
        # The local stack's launcher fetches the same jars into the same cache.
        install_kafka_jars()
        self.stop()
        if port_open(self.port) or port_open(self.controller_port):
            raise StackError(f"port {self.port} or {self.controller_port} is taken; "
                             "cannot start the secured Kafka broker")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        data = self.state_dir / "kafka-data"
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(self.state_dir / "tls", ignore_errors=True)
        tls = make_tls_files(self.state_dir / "tls")
        broker_password = secrets.token_hex(16)
        write_log_config(self.state_dir)
        props = self.state_dir / "server.properties"
        props.touch(mode=0o600)
        props.write_text(_PROPERTIES.format(
            port=self.port, controller_port=self.controller_port, mechanism=MECHANISM,
            broker_user="broker", broker_password=broker_password, keystore=tls.keystore,
            ca_file=tls.ca_file, log_dir=data, partitions=self.partitions))
        run_checked(self._java(
            "kafka.tools.StorageTool", "format", f"--cluster-id={new_cluster_id()}",
            f"--config={props}",
            "--add-scram", f"{MECHANISM}=[name=broker,password={broker_password}]",
            "--add-scram", f"{MECHANISM}=[name={self.user},password={self.password}]"),
            "formatting the secured Kafka broker's storage")
        log = self.state_dir / "kafka.log"
        spawn(self._java("kafka.Kafka", str(props)), log, self._pidfile, env=dict(os.environ))
        wait_until(lambda: port_open(self.port), 90, f"secured Kafka broker {self.bootstrap}", log)

    def stop(self) -> None:
        stop_pidfile(self._pidfile)
