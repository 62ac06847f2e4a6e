"""The broker process, wiring only: store + metadata + processors behind two listeners
(listenPort and the fast channel listenPort-2), registration with the name servers, timers,
and an ordered shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from sidewinder.acl.plain import PlainAclFiles
from sidewinder.acl.validator import AclValidator
from sidewinder.broker.clients import Clients, ConsumerGroup
from sidewinder.broker.config import BrokerConfig
from sidewinder.broker.groups import SubscriptionGroups
from sidewinder.broker.ha.metadata_sync import SlaveTables
from sidewinder.broker.ha.replication import Replication
from sidewinder.broker.long_polling import PullHolds
from sidewinder.broker.metrics import BrokerMetrics, BrokerSources
from sidewinder.broker.offsets import ConsumerOffsets
from sidewinder.broker.pop.ack import AckMessageProcessor, ChangeInvisibleTimeProcessor
from sidewinder.broker.pop.context import PopContext
from sidewinder.broker.pop.inspect import (
    NotificationProcessor,
    PeekMessageProcessor,
    PollingInfoProcessor,
)
from sidewinder.broker.pop.order import ConsumerOrderInfo
from sidewinder.broker.pop.polling import PopHolds
from sidewinder.broker.pop.pop_message import PopMessageProcessor
from sidewinder.broker.pop.revive import ReviveService
from sidewinder.broker.processors.admin_acl import AclAdmin
from sidewinder.broker.processors.admin_config import BrokerConfigAdmin
from sidewinder.broker.processors.admin_groups import GroupAdmin
from sidewinder.broker.processors.admin_maintenance import Maintenance
from sidewinder.broker.processors.admin_replication import ReplicationAdmin
from sidewinder.broker.processors.admin_stats import StatsAdmin
from sidewinder.broker.processors.admin_topics import TopicAdmin
from sidewinder.broker.processors.assignment import AssignmentProcessor
from sidewinder.broker.processors.client_calls import ClientCallsProcessor
from sidewinder.broker.processors.clients import ClientManageProcessor
from sidewinder.broker.processors.end_transaction import EndTransactionProcessor
from sidewinder.broker.processors.offsets import OffsetProcessor
from sidewinder.broker.processors.pull import PullProcessor
from sidewinder.broker.processors.query import QueryProcessor
from sidewinder.broker.processors.recall import RecallProcessor
from sidewinder.broker.processors.reply_message import ReplyProcessor
from sidewinder.broker.processors.send_back import SendBackProcessor
from sidewinder.broker.pull_stats import PullStats
from sidewinder.broker.registration import Registration
from sidewinder.broker.request_modes import RequestModes
from sidewinder.broker.routes import AdminHandlers, PopHandlers, build_routes
from sidewinder.broker.schedule import ScheduleService
from sidewinder.broker.send import SendProcessor, host_of
from sidewinder.broker.stats_manager import MINUTE_SAMPLE_MS, BrokerStatsManager
from sidewinder.broker.timer import TimerService, TimerSettings, snap_precision
from sidewinder.broker.topic_route import TopicSubscribeInfo
from sidewinder.broker.topics import TopicTable
from sidewinder.broker.transactions import Transactions
from sidewinder.common.deadline import expire_after
from sidewinder.common.metrics_server import MetricsExporterType, MetricsServer
from sidewinder.protocol.codes import RequestCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.remoting.client import RemotingClient
from sidewinder.remoting.connection import Connection
from sidewinder.remoting.dispatch import ProcessorTable
from sidewinder.remoting.latency import RpcLatency, Timed
from sidewinder.remoting.server import RemotingServer
from sidewinder.remoting.tls import ServerTls, client_context
from sidewinder.store.dispatchers import parse_delay_levels
from sidewinder.store.message_store import MessageStore
from sidewinder.store.timer_store import TimerStore

if TYPE_CHECKING:
    from sidewinder.proxy.grpc_server import GrpcFront

log = structlog.get_logger(__name__)

CLIENT_SCAN_S = 10.0
SHUTDOWN_BUDGET_S = 8.0
TOPIC_REGISTRATION_WAIT_S = 1.0


class _ClientChannels:
    def __init__(self, clients: Clients) -> None:
        self.clients = clients

    def on_connect(self, connection: Connection) -> None:
        pass

    def on_close(self, connection: Connection) -> None:
        self.clients.connection_closed(connection)

    def on_idle(self, connection: Connection) -> None:
        pass


class BrokerApp:
    def __init__(self, config: BrokerConfig, conf_path: Path | None = None) -> None:
        """`conf_path`: the file updateBrokerConfig writes to, the one the broker started from
        (RocketMQ's -c); without one, config/broker.properties under the store root."""
        self.config = config
        config_dir = config.store.store_path_root_dir / "config"
        self.store = MessageStore(
            config.store,
            store_host=host_of(config.broker_addr),
            owner=(
                f"broker {config.broker_name} of cluster {config.broker_cluster_name} "
                f"at {config.broker_addr}"
            ),
            topic_size_buckets=config.metrics_exporter_type is MetricsExporterType.PROM,
        )
        self.topics = TopicTable(config, config_dir)
        self.groups = SubscriptionGroups(
            config_dir, auto_create=config.auto_create_subscription_group
        )
        self.offsets = ConsumerOffsets(config_dir)
        self.request_modes = RequestModes(config_dir)
        self.clients = Clients(self._notify_ids_changed)
        self.holds = PullHolds()
        self.store.arrival_listeners.append(self.holds.arrived)
        # To the name servers (and a slave's master): TLS with tls.enable or when this broker
        # enforces it, as RocketMQ's BrokerStartup sets useTLS.
        self.outbound = RemotingClient(
            tls=client_context(config.tls) if config.tls.client_enabled else None
        )
        self.registration = Registration(config, self.topics, self.outbound)
        self.transactions = Transactions(config, self.store, self.topics, self.clients)
        levels = parse_delay_levels(config.store.message_delay_level)
        self.schedule = ScheduleService(self.store, config_dir, levels)
        self.replication = Replication(
            config,
            self.store,
            self.registration,
            self.outbound,
            SlaveTables(self.topics, self.groups, self.offsets, self.schedule, self.request_modes),
            persist=self._persist_tables,
        )
        self.timer = TimerService(
            self.store,
            TimerStore(
                config.store.store_path_root_dir,
                precision_ms=snap_precision(config.timer_precision_ms),
                log_file_size=config.mapped_file_size_timer_log,
                roll_window_slots=config.timer_roll_window_slot,
            ),
            flush_interval_ms=config.timer_flush_interval_ms,
        )
        timer = TimerSettings(
            config.timer_wheel_enable,
            snap_precision(config.timer_precision_ms),
            config.timer_max_delay_sec,
        )
        # rocketmq_rpc_latency, when metrics are on: the processors' `process` calls are
        # timed by wrapping them (_metrics_server); the send processor times its own.
        prom = config.metrics_exporter_type is MetricsExporterType.PROM
        self.rpc_latency = RpcLatency() if prom else None
        self.acl = self._acl_validator()
        send = SendProcessor(
            config,
            self.store,
            self.topics,
            self.groups,
            max(levels, default=0),
            timer,
            topics_changed=self._topic_created,
            latency=self.rpc_latency,
        )
        self.pulls = PullStats()
        self.stats = BrokerStatsManager(config.broker_cluster_name, self.store.stats, self.pulls)
        send_back = SendBackProcessor(
            config,
            self.store,
            self.topics,
            self.groups,
            max(levels, default=0),
            topics_changed=self._topic_created,
            sent_back=self.stats.inc_send_back,
        )
        pull = PullProcessor(
            config,
            self.store,
            self.topics,
            self.groups,
            self.clients,
            self.offsets,
            self.holds,
            self.pulls,
        )
        client_manage = ClientManageProcessor(
            config, self.clients, self.groups, self.topics, metadata_changed=self._metadata_changed
        )
        assignment = AssignmentProcessor(
            config,
            self.request_modes,
            self.clients,
            TopicSubscribeInfo(config, self.outbound),
            modes_saved=self._modes_saved,
        )
        admin = AdminHandlers(
            topics=TopicAdmin(
                config,
                self.store,
                self.topics,
                self.offsets,
                self.clients,
                metadata_saved=self._metadata_saved,
                topic_deleted=self.stats.on_topic_deleted,
            ),
            groups=GroupAdmin(
                self.groups,
                self.offsets,
                self.clients,
                metadata_saved=self._metadata_saved,
                group_deleted=self.stats.on_group_deleted,
            ),
            stats=StatsAdmin(
                config,
                self.store,
                self.topics,
                self.groups,
                self.offsets,
                self.clients,
                self.stats,
            ),
            replication=ReplicationAdmin(self.offsets, self.schedule),
            config=BrokerConfigAdmin(
                config,
                conf_path or config.store.store_path_root_dir / "config" / "broker.properties",
                permission_changed=self._permission_changed,
            ),
            maintenance=Maintenance(config, self.store, self.topics, self.clients),
            acl=AclAdmin(config, self.acl),
            assignment=assignment,
        )
        self.pop = PopContext(
            config,
            self.store,
            self.topics,
            self.groups,
            self.offsets,
            timer,
            host_of(config.broker_addr),
            ConsumerOrderInfo(config_dir),
        )
        self.pop_holds = PopHolds(config.max_pop_polling_size, config.pop_polling_size)
        self.store.arrival_listeners.append(self.pop_holds.arrived)
        self.revive = ReviveService(self.pop, lambda: self.timer.delivered_before_ms)
        table = build_routes(
            config,
            assignment=assignment,
            send=send,
            send_back=send_back,
            end_transaction=EndTransactionProcessor(self.store, self.transactions),
            pull=pull,
            query=QueryProcessor(self.store),
            clients=client_manage,
            offsets=OffsetProcessor(self.store, self.offsets),
            admin=admin,
            reply=ReplyProcessor(
                config, self.store, self.topics, self.clients, self._topic_created
            ),
            client_calls=ClientCallsProcessor(
                config, self.store, self.topics, self.offsets, self.clients
            ),
            pop=PopHandlers(
                PopMessageProcessor(self.pop, self.pop_holds),
                AckMessageProcessor(self.pop, self.pop_holds),
                ChangeInvisibleTimeProcessor(self.pop),
                PeekMessageProcessor(self.pop),
                NotificationProcessor(self.pop, self.pop_holds),
                PollingInfoProcessor(self.pop, self.pop_holds),
            ),
            recall=RecallProcessor(
                config, self.topics, self.store, timer, host_of(config.broker_addr)
            ),
            latency=self.rpc_latency,
        )
        if self.acl is not None:
            table.guard(self.acl.check)  # every request, before any processor sees it
        self.metrics = self._metrics_server(table)
        self.grpc: GrpcFront | None = None  # the gRPC front, when grpcServerPort is set
        listener = _ClientChannels(self.clients)
        tls = ServerTls(config.tls)  # one context for both listeners
        tls.check()  # certificate files that cannot be read stop the start
        self.server = RemotingServer(table, config.server, listener=listener, tls=tls)
        fast = config.server.model_copy(update={"listen_port": config.server.listen_port - 2})
        self.fast_server = RemotingServer(table, fast, listener=listener, tls=tls)
        self._tasks: list[asyncio.Task[None]] = []
        self._persisting: asyncio.Task[None] | None = None
        self._metadata_dirty = False

    def _acl_validator(self) -> AclValidator | None:
        """aclEnable: the plain ACL files under the RocketMQ home, read now (a file RocketMQ
        would refuse stops the start)."""
        if not self.config.acl_enable:
            return None
        home = self.config.rocketmq_home_path
        if home is None:
            log.warning("broker.acl_without_home", hint="set rocketmqHome or ROCKETMQ_HOME")
        return AclValidator(PlainAclFiles(home))

    def _metrics_server(self, table: ProcessorTable) -> MetricsServer | None:
        """/metrics when metricsExporterType is PROM: the processors' `process` calls timed,
        every other figure read from the tables at scrape time."""
        rpc = self.rpc_latency
        if rpc is None:
            return None
        # The send processor times its own requests, a chunk at a time.
        table.instrument(
            lambda processor: (
                processor if isinstance(processor, SendProcessor) else Timed(processor, rpc)
            )
        )
        sources = BrokerSources(
            self.store, self.topics, self.groups, self.clients, self.offsets, self.pulls, table, rpc
        )
        return MetricsServer(BrokerMetrics(self.config, sources).registry())

    async def start(self, host: str = "0.0.0.0") -> None:
        loop = asyncio.get_running_loop()
        tables = (self.topics, self.groups, self.offsets, self.schedule, self.request_modes)
        for table in (*tables, self.pop.orders):
            await loop.run_in_executor(None, table.load)
        self.transactions.ensure_topics()
        self.pop.ensure_revive_topic()
        await self.store.start()
        self.transactions.load()
        await self.timer.load()
        if not self.replication.is_slave:
            # What writes to the store on its own runs on a master only, as in RocketMQ.
            self.transactions.start()
            self.schedule.start()
            self.timer.start()
            self.revive.start()
        await self.server.start(host)
        await self.fast_server.start(host)
        await self.replication.start(host)
        await self.registration.register_all()
        self.registration.start()
        if self.metrics is not None:
            await self.metrics.start(
                self.config.metrics_prom_exporter_host or self.config.broker_ip1,
                self.config.metrics_prom_exporter_port,
            )
        self._tasks = [
            loop.create_task(
                self._every(
                    self.config.flush_consumer_offset_interval / 1000, self._persist_offsets
                )
            ),
            loop.create_task(self._every(CLIENT_SCAN_S, self._scan_clients)),
            loop.create_task(self._sample_stats()),
        ]
        if self.acl is not None:
            self._tasks.append(loop.create_task(self.acl.watch()))
        if self.config.grpc_server_port is not None:
            await self._start_grpc(host)
        log.info("broker.started", addr=self.config.broker_addr, name=self.config.broker_name)

    async def _start_grpc(self, host: str) -> None:
        """RocketMQ 5's gRPC front in local mode: the same front as mqproxy, its routes from
        this broker's name servers, its requests to this broker over loopback remoting."""
        from sidewinder.proxy.auth import acl_checks
        from sidewinder.proxy.grpc_server import GrpcFront  # grpc only when it is on
        from sidewinder.proxy.messaging import MessagingActivity

        port = self.config.grpc_server_port or 0
        if not self.config.namesrv_addrs:
            raise ValueError("grpcServerPort needs namesrvAddr: the gRPC front finds routes there")
        checks = acl_checks(self.acl) if self.acl is not None else (None, None)
        activity = MessagingActivity(
            self.config.namesrv_addrs, (self.config.broker_ip1, port), *checks
        )
        self.grpc = GrpcFront(activity, host, port, tls=self.config.tls)
        await self.grpc.start()
        activity.endpoints = (self.config.broker_ip1, self.grpc.port)

    async def _every(self, period_s: float, work: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(period_s)
            try:
                await work()
            except OSError as exc:
                log.error("broker.periodic_failed", error=str(exc))

    async def _sample_stats(self) -> None:
        """The statistics' snapshots: at start, then every 10 s, as RocketMQ's StatsItemSets."""
        while True:
            self.stats.tick()
            await asyncio.sleep(MINUTE_SAMPLE_MS / 1000)

    async def _persist_offsets(self) -> None:
        loop = asyncio.get_running_loop()
        if self.offsets.dirty:
            await loop.run_in_executor(None, self.offsets.writer())
        if self.pop.orders.dirty:
            await loop.run_in_executor(None, self.pop.orders.writer())
        await loop.run_in_executor(None, self.schedule.writer())

    async def _scan_clients(self) -> None:
        self.clients.expire(time.monotonic())

    async def _persist_tables(self) -> None:
        """Write topics, groups, offsets, delay offsets and request modes (a slave, after
        copying its master's)."""
        loop = asyncio.get_running_loop()
        for table in (self.topics, self.groups, self.offsets, self.schedule, self.request_modes):
            await loop.run_in_executor(None, table.writer())

    def _notify_ids_changed(self, group: ConsumerGroup) -> None:
        if not self.config.notify_consumer_ids_changed_enable:
            return
        for channel in group.channels.values():
            connection = channel.connection
            if isinstance(connection, Connection):
                connection.invoke_oneway(
                    RemotingCommand.request(
                        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group.name}
                    )
                )

    def _metadata_changed(self) -> None:
        """Persist topics and groups and re-register, once per burst of changes."""
        self._metadata_dirty = True
        if self._persisting is None or self._persisting.done():
            self._persisting = asyncio.get_running_loop().create_task(self._persist_metadata())

    async def _modes_saved(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.request_modes.writer())

    async def _metadata_saved(self) -> None:
        """Persist and re-register now, returning once the name servers know."""
        self._metadata_changed()
        if self._persisting is not None:
            await asyncio.shield(self._persisting)

    async def _permission_changed(self) -> None:
        """brokerPermission changed: re-register now, the topics' perms cut by it."""
        self.topics.data_version.bump()
        await self._metadata_saved()

    async def _topic_created(self) -> None:
        """A send made a topic: answer once the name servers know it (a consumer started next
        finds its route), but never keep the producer past TOPIC_REGISTRATION_WAIT_S for a
        slow name server: RocketMQ registers oneway and answers at once."""
        self._metadata_changed()
        persisting = self._persisting
        if persisting is None or persisting.done():
            return
        # A future of our own: awaiting it neither cancels the persisting task at the deadline
        # nor needs a task (the send processor runs eagerly, outside one).
        saved: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        persisting.add_done_callback(lambda _: None if saved.done() else saved.set_result(None))
        expiry = expire_after(saved, TOPIC_REGISTRATION_WAIT_S)
        try:
            await saved
        finally:
            expiry.cancel()

    async def _persist_metadata(self) -> None:
        loop = asyncio.get_running_loop()
        while self._metadata_dirty:
            self._metadata_dirty = False
            await loop.run_in_executor(None, self.topics.writer())
            await loop.run_in_executor(None, self.groups.writer())
            await self.registration.register_all()

    async def stop(self) -> None:
        """Unregister, stop accepting, answer held pulls, save metadata, close the store."""
        if self.grpc is not None:
            await self.grpc.stop()
            await self.grpc.activity.close()
        if self.metrics is not None:
            await self.metrics.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SHUTDOWN_BUDGET_S / 2):
                await self.registration.stop()
        await self.schedule.stop()
        await self.revive.stop()
        self.pop_holds.release_all()
        await self.timer.stop()
        await self.transactions.stop()
        self.holds.release_all()
        await asyncio.sleep(0)
        await self.server.stop()
        await self.fast_server.stop()
        await self.replication.stop()
        if self._persisting is not None:
            await asyncio.gather(self._persisting, return_exceptions=True)
        loop = asyncio.get_running_loop()
        for table in (self.topics, self.groups, self.offsets, self.schedule, self.pop.orders):
            await loop.run_in_executor(None, table.writer())
        await self.store.shutdown()
        await self.outbound.close()
        log.info("broker.stopped")
