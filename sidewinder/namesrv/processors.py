"""The name server's request processors, one per concern (RocketMQ's DefaultRequestProcessor)."""

from __future__ import annotations

import asyncio
import time
import zlib
from typing import Any

import structlog

from sidewinder.common.config import ConfigError
from sidewinder.common.properties import parse_properties, update_properties_file
from sidewinder.namesrv.config import NamesrvConfig, apply_namesrv_update
from sidewinder.namesrv.kv_config import KVConfig
from sidewinder.namesrv.route_table import RouteTable
from sidewinder.protocol import body
from sidewinder.protocol.codes import RequestCode, ResponseCode
from sidewinder.protocol.command import RemotingCommand
from sidewinder.protocol.errors import NoPermission, SidewinderError
from sidewinder.protocol.headers import (
    BrokerIdentityHeader,
    BrokerNameHeader,
    ClusterHeader,
    GetRouteInfoRequestHeader,
    KVConfigHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    TopicHeader,
)
from sidewinder.protocol.register_body import decode_register_body
from sidewinder.remoting.dispatch import RequestContext

log = structlog.get_logger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
# MQVersion.Version.V4_9_4's ordinal: clients from 4.9.4 on read standard JSON routes.
STANDARD_JSON_SINCE_VERSION = 402
DATA_VERSION_SHAPE: body.Shape = {"counter": int, "timestamp": int}


class BrokerRegistry:
    """REGISTER_BROKER, UNREGISTER_BROKER, QUERY_DATA_VERSION."""

    def __init__(self, routes: RouteTable, kv: KVConfig) -> None:
        self.routes = routes
        self.kv = kv

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.REGISTER_BROKER:
            return self._register(ctx, request)
        if request.code == RequestCode.UNREGISTER_BROKER:
            header = BrokerIdentityHeader.from_ext(request.ext_fields)
            self.routes.unregister_broker(
                cluster=header.cluster_name,
                broker_addr=header.broker_addr,
                broker_name=header.broker_name,
                broker_id=header.broker_id,
            )
            log.info("namesrv.unregistered", broker=header.broker_addr)
            return request.reply(ResponseCode.SUCCESS)
        header = BrokerIdentityHeader.from_ext(request.ext_fields)
        version = body.request_object(request, DATA_VERSION_SHAPE)
        changed = self.routes.topic_config_changed(header.broker_addr, version)
        if not changed:
            self.routes.touch(header.broker_addr, time.monotonic())
        live = self.routes.live.get(header.broker_addr)
        reply = request.reply(ResponseCode.SUCCESS, ext_fields={"changed": str(changed).lower()})
        if live is not None:
            reply.body = body.dumps(live.data_version).encode()
        return reply

    def _register(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext(request.ext_fields)
        data = request.body_bytes
        if header.body_crc32 and zlib.crc32(data) & 0x7FFFFFFF != header.body_crc32:
            raise SidewinderError("crc32 not match")
        registration = decode_register_body(data, bool(header.compressed))  # or BodyError
        wrapper = registration.get("topicConfigSerializeWrapper") or {}
        result = self.routes.register_broker(
            cluster=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            topic_configs=wrapper.get("topicConfigTable") if wrapper else None,
            data_version=wrapper.get("dataVersion") or {},
            filter_servers=registration.get("filterServerList") or [],
            channel=ctx.connection,
            now_s=time.monotonic(),
            enable_acting_master=bool(header.enable_acting_master),
            zone_name=header.zone_name,
        )
        response_header = RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr)
        table = {"table": self.kv.namespace(ORDER_TOPIC_CONFIG)}
        return request.reply(
            ResponseCode.SUCCESS,
            ext_fields=response_header.to_ext(),
            body=body.dumps(table).encode(),
        )


class RouteQueries:
    """Routes, cluster info and topic lists; topic deletion and write-permission changes."""

    def __init__(self, routes: RouteTable, kv: KVConfig, config: NamesrvConfig) -> None:
        self.routes = routes
        self.kv = kv
        self.config = config  # orderMessageEnable is read per request: updates are live

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        code = request.code
        if code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return self._route(request)
        if code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return _json_reply(request, self.routes.cluster_info())
        if code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER:
            return _json_reply(request, {"topicList": self.routes.all_topics()})
        if code == RequestCode.GET_TOPICS_BY_CLUSTER:
            cluster = ClusterHeader.from_ext(request.ext_fields).cluster
            return _json_reply(request, {"topicList": self.routes.topics_of_cluster(cluster)})
        if code == RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS:
            topics, addr = self.routes.system_topics()
            listing: dict[str, Any] = {"topicList": topics}
            if addr is not None:
                listing["brokerAddr"] = addr
            return _json_reply(request, listing)
        if code == RequestCode.DELETE_TOPIC_IN_NAMESRV:
            self.routes.delete_topic(TopicHeader.from_ext(request.ext_fields).topic)
            return request.reply(ResponseCode.SUCCESS)
        if code in (RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER):
            name = BrokerNameHeader.from_ext(request.ext_fields).broker_name
            allow = code == RequestCode.ADD_WRITE_PERM_OF_BROKER
            count = self.routes.change_write_perm(name, allow=allow)
            key = "addTopicCount" if allow else "wipeTopicCount"
            return request.reply(ResponseCode.SUCCESS, ext_fields={key: str(count)})
        # The unit-topic lists of 4.x: no unit topics here.
        return _json_reply(request, {"topicList": []})

    def _route(self, request: RemotingCommand) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext(request.ext_fields)
        route = self.routes.topic_route(header.topic)
        if route is None:
            return request.reply(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}{FAQ}",
            )
        if self.config.order_message_enable:
            order = self.kv.get(ORDER_TOPIC_CONFIG, header.topic)
            if order is not None:
                route["orderTopicConf"] = order
        standard = (
            bool(header.accept_standard_json_only) or request.version >= STANDARD_JSON_SINCE_VERSION
        )
        return request.reply(
            ResponseCode.SUCCESS, body=body.dumps(route, fastjson=not standard).encode()
        )


class KVProcessor:
    """PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE."""

    def __init__(self, kv: KVConfig) -> None:
        self.kv = kv

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        header = KVConfigHeader.from_ext(request.ext_fields)
        code = request.code
        if code == RequestCode.GET_KVLIST_BY_NAMESPACE:
            values = self.kv.namespace(header.namespace)
            if not values:
                return request.reply(
                    ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
                )
            return _json_reply(request, {"table": values})
        if header.key is None:
            raise SidewinderError("the custom field <key> is null")
        if code == RequestCode.PUT_KV_CONFIG:
            if header.value is None:
                raise SidewinderError("the custom field <value> is null")
            await asyncio.get_running_loop().run_in_executor(
                None, self.kv.put, header.namespace, header.key, header.value
            )
            return request.reply(ResponseCode.SUCCESS)
        if code == RequestCode.GET_KV_CONFIG:
            value = self.kv.get(header.namespace, header.key)
            if value is None:
                return request.reply(
                    ResponseCode.QUERY_NOT_FOUND,
                    f"No config item, Namespace: {header.namespace} Key: {header.key}",
                )
            return request.reply(ResponseCode.SUCCESS, ext_fields={"value": value})
        # The KV file is fsynced on every change: never on the event loop.
        await asyncio.get_running_loop().run_in_executor(
            None, self.kv.delete, header.namespace, header.key
        )
        return request.reply(ResponseCode.SUCCESS)


class NamesrvConfigProcessor:
    """UPDATE_NAMESRV_CONFIG (318) and GET_NAMESRV_CONFIG (319).

    An update sets the keys on the running config and writes them into `configStorePath`
    (RocketMQ's Configuration store), the file's other lines kept; the server's keys take
    effect at the next start. The paths are refused as RocketMQ 4.9.7 refuses them, and the
    rest of 4.9.8's black list as 4.9.8 does.
    """

    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.GET_NAMESRV_CONFIG:
            text = "".join(f"{k}={v}\n" for k, v in self.config.as_properties().items())
            return request.reply(ResponseCode.SUCCESS, body=text.encode())
        if not request.body:
            return request.reply(ResponseCode.SUCCESS)
        try:
            values = parse_properties(request.body_bytes.decode(), source="updateNamesrvConfig")
        except ValueError as exc:
            raise SidewinderError(f"string2Properties error: {exc}") from None
        if values.keys() & {"kvConfigPath", "configStorePath"}:
            raise NoPermission("Can not update config path")
        if values.keys() & {"rocketmqHome", "configBlackList"}:
            raise NoPermission("Can not update config in black list.")
        try:
            known = apply_namesrv_update(self.config, values)
        except ConfigError as exc:
            raise SidewinderError(str(exc)) from None
        if known:
            path = self.config.config_store_path
            await asyncio.get_running_loop().run_in_executor(
                None, update_properties_file, path, known
            )
        log.info("namesrv.config_updated", remote=ctx.remote_address, keys=sorted(known))
        return request.reply(ResponseCode.SUCCESS)


def _json_reply(request: RemotingCommand, value: Any) -> RemotingCommand:
    return request.reply(ResponseCode.SUCCESS, body=body.dumps(value).encode())
