"""The composition root: builds each process's object graph from Settings. No I/O at import."""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
import socket
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from cronlog.infra.config import Settings

if TYPE_CHECKING:
    from cronlog.commands.owner.partition_owner import PartitionOwner
    from cronlog.fleet.announcer import WorkerAnnouncer
    from cronlog.infra.avro.codec import AvroCodec
    from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
    from cronlog.infra.grpc.server import ApiServer
    from cronlog.infra.kafka.event_replay import KafkaEventReplay
    from cronlog.infra.kafka.worker_announcements import KafkaWorkerDirectory
    from cronlog.infra.observability.api import ApiObservation
    from cronlog.infra.observability.projector import ProjectorObservation
    from cronlog.infra.observability.scheduler import SchedulerObservation
    from cronlog.infra.observability.worker import WorkerObservation
    from cronlog.projections.history_loop import HistoryProjectorLoop
    from cronlog.worker.runtime import WorkerRuntime

log = logging.getLogger(__name__)


def build_codec() -> AvroCodec:
    from cronlog.infra.avro.codec import AvroCodec

    return AvroCodec()


def build_scheduler(settings: Settings, observation: SchedulerObservation | None = None
                    ) -> tuple[PartitionOwner, object]:
    """observation: given the owner's metrics, its Kafka clients' statistics and what its
    readiness reads (infra/observability/scheduler.py)."""
    from cronlog.commands.owner.partition_owner import PartitionOwner
    from cronlog.commands.owner.ports import Topics
    from cronlog.infra.avro.event_mapping import AvroEventRecords
    from cronlog.infra.declared_queues import declared_queues
    from cronlog.infra.kafka.departed_owners import KafkaDepartedOwnerFence
    from cronlog.infra.kafka.owner_transport import KafkaOwnerTransport
    from cronlog.infra.kafka.topics import require_layout
    from cronlog.infra.observability.scheduler import (
        INBOX_CLIENT,
        TRANSACTIONS_CLIENT,
        OwnerProbes,
    )
    from cronlog.infra.owner_adapters import OwnerLogReplay, OwnerStoreAdapter
    from cronlog.infra.postgres.owner_state import PostgresOwnerState
    from cronlog.infra.system_clock import SystemClock

    # Topics of another partition count than the layout's are refused before the owner
    # joins its group (docs/partitions.md, "Migrating").
    require_layout(settings)
    codec = build_codec()
    records = AvroEventRecords()
    state = PostgresOwnerState(settings.postgres_dsn, settings.layout)
    store = OwnerStoreAdapter(state, codec)
    replay = OwnerLogReplay(build_event_replay(settings), state, settings)
    holder: dict[str, PartitionOwner] = {}
    kafka = observation.kafka if observation is not None else None
    transport = KafkaOwnerTransport(
        settings, codec, codec,
        on_assign=lambda ps: holder["owner"].assigned(ps),
        on_revoke=lambda ps: holder["owner"].revoked(ps),
        on_hand_over=lambda ps: holder["owner"].handing_over(ps, settings.handover_reach),
        consumer_statistics=kafka.listener(INBOX_CLIENT) if kafka else None,
        producer_statistics=kafka.listener(TRANSACTIONS_CLIENT) if kafka else None,
    )
    owner = PartitionOwner(
        owner_id=settings.instance_id, transport=transport, store=store, replay=replay,
        records=records, clock=SystemClock(),
        topics=Topics(settings.job_events_topic, settings.run_events_topic,
                      settings.replies_topic, settings.dispatch_topic,
                      settings.dead_letters_topic, settings.alerts_topic,
                      settings.poison_topic, settings.inbox_topic),
        lookahead=settings.lookahead, sparse_lookahead=settings.sparse_lookahead,
        poll_timeout=settings.owner_poll.total_seconds(),
        fire_chunk=settings.owner_batch, batch=settings.owner_batch,
        catch_up_window=settings.catch_up_window, limits=settings.tenant_limits,
        layout=settings.layout, start_timeout=settings.start_timeout,
        metrics=observation.owner_metrics if observation is not None else None,
        cycle_budget=settings.owner_cycle_budget, queues=declared_queues(settings),
        fence=KafkaDepartedOwnerFence(settings),
    )
    holder["owner"] = owner
    if observation is not None:
        observation.watch(OwnerProbes(
            assigned=lambda: transport.assigned if transport.joined else None,
            owned=lambda: frozenset(owner.epochs), resyncing=lambda: owner.resyncing,
            in_flight_by_tenant=owner.in_flight_by_tenant,
            calendar_followers_pending=lambda: owner.pending_followers))
    transport.start()
    return owner, transport


def build_worker(settings: Settings, queue: str,
                 observation: WorkerObservation | None = None) -> WorkerRuntime:
    from cronlog.infra.kafka.dispatch_source import KafkaDispatchSource
    from cronlog.infra.kafka.report_sink import KafkaReportSink
    from cronlog.infra.kafka.topics import require_dispatch_topics
    from cronlog.infra.system_clock import SystemClock
    from cronlog.worker.handlers import HandlerRegistry
    from cronlog.worker.runtime import WorkerRuntime
    from cronlog.worker.user_handlers import load_user_handlers

    codec = build_codec()
    # Served queues are declared ones, provisioned beforehand: no process creates topics.
    require_dispatch_topics(settings, [queue])
    from cronlog.infra.config_commands import command_policy
    from cronlog.infra.outbound_policy import outbound_policy

    handlers = HandlerRegistry(outbound=outbound_policy(settings),
                               commands=command_policy(settings))
    for module_name in settings.handler_modules:
        importlib.import_module(module_name).register(handlers)
    for name, handler in load_user_handlers(settings.worker_handlers, handlers.names()).items():
        handlers.register(name, handler)
    worker_id = settings.worker_id or f"{socket.gethostname()}-{queue}"
    if observation is None:
        return WorkerRuntime(
            worker_id=worker_id,
            source=KafkaDispatchSource(settings, queue, codec),
            reports=KafkaReportSink(settings, codec, worker_id),
            handlers=handlers,
            clock=SystemClock(),
            slots=settings.worker_slots,
            heartbeat_interval=settings.heartbeat_interval,
            cancel_grace=settings.cancel_grace,
            tenant_share=settings.worker_tenant_share,
        )
    from cronlog.infra.observability.worker import QueueProbes, dispatch_client

    metrics = observation.for_queue(queue)
    source = KafkaDispatchSource(settings, queue, codec,
                                 on_statistics=observation.kafka.listener(dispatch_client(queue)))
    reports = KafkaReportSink(settings, codec, worker_id,
                              on_given_up=lambda n: metrics.attempts_lost("report_dropped", n))
    worker = WorkerRuntime(worker_id=worker_id, source=source, reports=reports,
                           handlers=handlers, clock=SystemClock(), slots=settings.worker_slots,
                           heartbeat_interval=settings.heartbeat_interval,
                           cancel_grace=settings.cancel_grace, metrics=metrics,
                           tenant_share=settings.worker_tenant_share)
    observation.watch(queue, QueueProbes(
        worker.occupancy, lambda: source.assignment,
        lambda: reports.gathered + reports.unacknowledged))
    return worker


def build_announcer(settings: Settings, workers: Sequence[WorkerRuntime]) -> WorkerAnnouncer:
    """The worker process's announcements of itself: its queues, the handlers it offers,
    its slots summed over its queues, and those in use when it announces."""
    from cronlog.fleet.announcement import WorkerAnnouncement
    from cronlog.fleet.announcer import WorkerAnnouncer
    from cronlog.infra.kafka.worker_announcements import KafkaAnnouncements
    from cronlog.infra.system_clock import SystemClock

    host = socket.gethostname()
    # One record per process: a restarted process is a new worker, and the old one's
    # record leaves the list when it expires (or at once, after a clean stop).
    worker_id = settings.worker_id or f"{host}-{os.getpid()}"
    # The `command` handler is always registered, so that a command job on a worker that
    # allows none fails with the reason (docs/handlers.md); but such a worker offers no
    # command to run, and a command job on its queue is warned about.
    refused = set() if settings.command_allow else {"command"}
    handlers = tuple(sorted({name for w in workers for name in w.handler_names()} - refused))
    version = cronlog_version()

    def describe(at: datetime) -> WorkerAnnouncement:
        return WorkerAnnouncement(
            worker_id=worker_id, host=host, queues=settings.served_queues, handlers=handlers,
            slots=sum(w.slots for w in workers),
            slots_in_use=sum(w.occupancy().busy_slots for w in workers),
            version=version, at=at)

    return WorkerAnnouncer(describe, KafkaAnnouncements(settings, build_codec()), SystemClock())


def build_worker_directory(settings: Settings) -> KafkaWorkerDirectory:
    """The api's reader of the workers topic, started."""
    from cronlog.fleet.live_workers import LiveWorkers
    from cronlog.infra.kafka.worker_announcements import KafkaWorkerDirectory
    from cronlog.infra.system_clock import SystemClock

    directory = KafkaWorkerDirectory(settings, build_codec(), LiveWorkers(), SystemClock())
    directory.start()
    return directory


def cronlog_version() -> str:
    try:
        return importlib.metadata.version("cronlog")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_history_projector(settings: Settings,
                            observation: ProjectorObservation | None = None
                            ) -> HistoryProjectorLoop:
    """observation: given the loop's metrics, its consumer's statistics and what its
    readiness reads (infra/observability/projector.py)."""
    from cronlog.infra.clickhouse.rejected_events import ClickHouseRejectedEvents
    from cronlog.infra.kafka.event_feed import KafkaEventFeed
    from cronlog.projections.history import HistoryProjector
    from cronlog.projections.history_loop import HistoryProjectorLoop

    codec = build_codec()
    store = build_run_history(settings)
    store.ensure_schema()
    from cronlog.infra.clickhouse.alert_deliveries import ClickHouseAlertDeliveries
    from cronlog.infra.clickhouse.retention import HistoryRetention
    from cronlog.infra.observability.projector import HISTORY_CLIENT, ProjectorProbes
    from cronlog.infra.system_clock import SystemClock
    from cronlog.projections.combined_history import CombinedHistoryProjector
    from cronlog.projections.delivery_history import DeliveryHistoryProjector
    from cronlog.projections.job_history import JobHistoryProjector

    # The alert deliveries the notifier records (issue 37) too: same loop, same offsets.
    feed = KafkaEventFeed(settings, "history",
                          [settings.job_events_topic, settings.run_events_topic,
                           settings.alert_deliveries_topic], codec,
                          on_statistics=observation.kafka.listener(HISTORY_CLIENT)
                          if observation is not None else None)
    clock = SystemClock()
    projector = CombinedHistoryProjector(HistoryProjector(store), JobHistoryProjector(store),
                                         DeliveryHistoryProjector(ClickHouseAlertDeliveries(store)))
    rejected = ClickHouseRejectedEvents(store)
    rejected.ensure_schema()
    loop = HistoryProjectorLoop(feed, projector, clock, rejected, metrics=observation)
    if observation is not None:
        # Pinged from the endpoints' thread: a connection of its own, the loop's is not
        # thread-safe.
        probe = ClickHouseRejectedEvents(build_run_history(settings))
        observation.watch(ProjectorProbes(lambda: feed.assignment, probe.reachable))
    retention = HistoryRetention(store, settings.history_retention)
    loop.every(3600, lambda: retention.run(clock.now()))
    return loop


def build_event_replay(settings: Settings) -> KafkaEventReplay:
    """A reader of the event topics, for catch-ups, audits and replays."""
    from cronlog.infra.kafka.event_replay import KafkaEventReplay

    return KafkaEventReplay(settings, build_codec())


def build_run_history(settings: Settings, database: str | None = None) -> ClickHouseRunHistory:
    """The ClickHouse history adapter: the configured database, or another of the same
    server (replay's rebuild)."""
    from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory

    return ClickHouseRunHistory(settings.clickhouse_host, settings.clickhouse_port,
                                database or settings.clickhouse_database,
                                settings.clickhouse_user, settings.clickhouse_password,
                                secure=settings.clickhouse_secure,
                                verify=settings.clickhouse_verify,
                                ca_file=settings.clickhouse_ca_file)


def build_api(settings: Settings, observation: ApiObservation | None = None) -> ApiServer:
    """observation: the api's metrics registry and Kafka statistics; one of its own when
    not given (its gRPC health follows the same facts either way)."""
    import grpc
    from grpc_health.v1 import health

    from cronlog.commands.api.calendar_api import CalendarApi
    from cronlog.commands.api.channel_api import ChannelApi
    from cronlog.commands.api.dead_letters import DeadLetterRedrive
    from cronlog.commands.api.history_proofs import HistoryProofs
    from cronlog.commands.api.job_api import JobApi
    from cronlog.commands.api.job_batch import wave_for
    from cronlog.commands.api.readiness import ReadinessWatch
    from cronlog.infra.avro.event_mapping import record_to_event, spec_from_record
    from cronlog.infra.declared_queues import declared_queues
    from cronlog.infra.grpc.auth import (
        OPEN_MODE_WARNING,
        TenantAuthInterceptor,
        TokenTable,
        check_open_bind,
    )
    from cronlog.infra.grpc.budget_interceptor import TenantBudget, TenantBudgetInterceptor
    from cronlog.infra.grpc.request_metrics import RequestMetricsInterceptor
    from cronlog.infra.grpc.server import (
        SERVICE_METHODS,
        SERVICE_NAME,
        ApiServer,
        SpecRecords,
        server_credentials,
        set_serving,
    )
    from cronlog.infra.grpc.servicer import JobServiceServicer
    from cronlog.infra.kafka.command_channel import KafkaCommandChannel
    from cronlog.infra.kafka.event_log_reads import KafkaEventLogReads
    from cronlog.infra.kafka.scheduler_group import KafkaSchedulerGroup
    from cronlog.infra.kafka.topics import require_dispatch_topics
    from cronlog.infra.observability.api import (
        COMMANDS_CLIENT,
        REPLIES_CLIENT,
        ApiObservation,
    )
    from cronlog.infra.observability.fleet import LiveWorkerCount
    from cronlog.infra.postgres.calendar_reads import PostgresCalendarReads
    from cronlog.infra.postgres.channel_reads import PostgresChannelReads
    from cronlog.infra.postgres.job_queries import PostgresJobQueries
    from cronlog.infra.postgres.partition_owners import PostgresPartitionOwners
    from cronlog.infra.postgres.spec_history import PostgresSpecHistory
    from cronlog.infra.system_clock import SystemClock
    from cronlog.projections.state import JobRow

    # Before anything connects anywhere: a refused start leaves nothing behind.
    check_open_bind(settings.grpc_address, bool(settings.tenant_tokens), settings.api_open)
    # Jobs are accepted only for queues an owner can dispatch to.
    require_dispatch_topics(settings, settings.queues)
    codec = build_codec()
    health_servicer = health.HealthServicer()
    owner_records = PostgresPartitionOwners(settings.postgres_dsn)
    observation = observation or ApiObservation()
    # Health says SERVING only while every inbox partition's owner has caught up, the reply
    # reader reads and the inbox producer reaches Kafka.
    readiness = ReadinessWatch(settings.layout, KafkaSchedulerGroup(settings),
                               owner_records, lambda ready: set_serving(health_servicer, ready),
                               path=observation)
    channel = KafkaCommandChannel(
        settings, codec, codec, explain=readiness.explain,
        producer_statistics=observation.kafka.listener(COMMANDS_CLIENT),
        consumer_statistics=observation.kafka.listener(REPLIES_CLIENT))
    observation.watch_reply_reader(channel.reader_problem)
    observation.watch_owners(readiness)
    jobs = PostgresJobQueries(settings.postgres_dsn, codec)
    calendar_reads = PostgresCalendarReads(settings.postgres_dsn)
    clock = SystemClock()
    channel_reads = PostgresChannelReads(settings.postgres_dsn)
    spec_history = PostgresSpecHistory(settings.postgres_dsn, codec)
    api = JobApi(bus=channel, jobs=jobs, queues=declared_queues(settings),
                 specs=SpecRecords(), clock=clock,
                 reply_timeout=settings.reply_timeout.total_seconds(),
                 limits=settings.tenant_limits, upstreams=jobs, calendars=calendar_reads,
                 channels=channel_reads, spec_history=spec_history)
    calendars = CalendarApi(bus=channel, calendars=calendar_reads, clock=clock,
                            reply_timeout=settings.reply_timeout.total_seconds())
    # Alert channels (issue 37): secrets derive from the operator's key, never stored.
    channels = ChannelApi(bus=channel, channels=channel_reads, clock=clock,
                          signing_key=settings.alert_signing_key,
                          reply_timeout=settings.reply_timeout.total_seconds())

    def decode_spec(row: JobRow) -> object:
        _, record = codec.decode(row.spec_event)
        return spec_from_record(record["spec"])

    tokens = TokenTable(settings.tenant_tokens)
    # First, so that calls the tenant check refuses are counted too.
    interceptors: list[grpc.ServerInterceptor] = [  # type: ignore[type-arg]
        RequestMetricsInterceptor(SERVICE_NAME, SERVICE_METHODS, observation)]
    if tokens:
        interceptors.append(TenantAuthInterceptor(tokens))
    else:
        log.warning(OPEN_MODE_WARNING)
    # Inside the tenant check, so that it knows the caller's tenant (invariant 12).
    interceptors.append(TenantBudgetInterceptor(SERVICE_NAME, SERVICE_METHODS, TenantBudget(
        settings.tenant_command_rate, settings.tenant_command_burst, settings.tenant_read_rate,
        settings.tenant_read_burst, settings.api_threads, settings.api_tenant_share),
        observation))
    fleet = build_worker_directory(settings)
    observation.metrics.add_collector(LiveWorkerCount(fleet.live, settings.queues))
    servicer = JobServiceServicer(api, jobs, build_run_history(settings),
                                  decode_spec, clock,  # type: ignore[arg-type]
                                  auth_required=bool(tokens), calendars=calendars,
                                  batch_wave=wave_for(settings.layout.kafka), fleet=fleet,
                                  declared=declared_queues(settings))
    servicer.serve_channels(channels)
    # ListAlertDeliveries (issue 37): the history's alert_deliveries.
    from cronlog.infra.clickhouse.alert_deliveries import ClickHouseAlertDeliveries

    servicer.serve_alert_deliveries(ClickHouseAlertDeliveries(build_run_history(settings)))
    # RedriveDeadLetters (issue 37): its commands go in the tenant's turn of the batch waves.
    servicer.serve_dead_letters(DeadLetterRedrive(
        bus=channel, dead_letters=jobs, runs=jobs, clock=clock,
        reply_timeout=settings.reply_timeout.total_seconds()))
    # VerifyHistory and WhatIf (issue 38): the log read within a bound a tenant cannot move.
    servicer.serve_proofs(HistoryProofs(KafkaEventLogReads(settings), clock,
                                        settings.catch_up_window, record_to_event))
    # TestChannel (issue 37): sent by the notifier's own senders, through the same fence.
    from cronlog.commands.api.channel_testing import ChannelTester
    from cronlog.infra.notifier.senders import alert_senders
    servicer.serve_channel_tests(ChannelTester(channels, alert_senders(settings), clock))
    return ApiServer(settings.grpc_address, server_credentials(settings), interceptors,
                     servicer, health_servicer, channel, readiness,
                     closing=[jobs, calendar_reads, channel_reads, spec_history, owner_records,
                              fleet],
                     threads=settings.api_threads,
                     maximum_concurrent_rpcs=settings.api_max_concurrent_rpcs)
