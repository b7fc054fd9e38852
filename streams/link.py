"""The MQTT link: one aiomqtt client at a time, reconnecting with backoff and jitter.

A fresh client every attempt; MQTT v5 first, 3.1.1 when the broker speaks only that. The
session is persistent (stable client id, clean start off, a session expiry), so QoS 1 captions
sent while Chorus was down arrive when it comes back. The last will says `offline` (retained);
`online` is published on every connect. Incoming messages go to a callback that must not block
(it puts them in bounded queues), handed to `run`; outgoing ones wait in a bounded outbox while disconnected.

QoS 1 messages are acknowledged by hand: a callback that returns True takes the message and calls
`Link.ack` once it is safe (a caption: once committed), so a crash before that leaves the message
with the broker, which sends it again on reconnect. The receive maximum (MQTT 5) bounds how many
may wait unacknowledged; the broker keeps the rest.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from streams.topics import Topics
from streams.wire import message_key

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LinkConfig:
    host: str = "localhost"
    port: int = 1883
    username: str | None = None
    password: str | None = None
    client_id: str = "chorus"
    root: str = "chorus/v1"
    protocol: str = "auto"  # auto | 5 | 3.1.1
    session_expiry_s: int = 7 * 86400
    keepalive_s: int = 30
    tls: bool = False  # TLS with the system's CAs, or with tls_ca when given
    tls_ca: str | None = None
    tls_cert: str | None = None  # a client certificate, for brokers that ask for one
    tls_key: str | None = None
    receive_max: int = 1000  # QoS 1 messages taken but not yet acknowledged (MQTT 5)
    max_packet: int = 4_194_304  # MQTT 5: the broker drops a larger publish instead of sending it to us
    outbox: int = 2000


@dataclass
class Inbound:
    topic: str
    payload: bytes
    qos: int
    response_topic: str | None = None
    correlation: bytes | None = None
    user: dict[str, str] = field(default_factory=dict)
    mid: int = 0
    session: int = 0  # which connection brought it: an ack is only valid on that one

    @cached_property
    def key(self) -> str:
        """Recognises this message when the broker sends it again (the poison journal)."""
        return message_key(self.topic, self.payload)


class Link:
    def __init__(self, cfg: LinkConfig):
        self.cfg = cfg
        self.topics = Topics(cfg.root)
        self.connected = asyncio.Event()
        self.outbox: asyncio.Queue = asyncio.Queue(maxsize=cfg.outbox)
        self.protocol = aiomqtt.ProtocolVersion.V311 if cfg.protocol == "3.1.1" else aiomqtt.ProtocolVersion.V5
        self.dropped = 0
        self.connects = 0
        self.last_error: str | None = None
        self._client: aiomqtt.Client | None = None
        self._was_up = False
        self._session_no = 0

    # -- publishing ---------------------------------------------------------------------
    def publish(self, topic: str, payload: bytes | str, *, qos: int = 0, retain: bool = False,
                correlation: bytes | None = None) -> bool:
        """Queue a message; False (and counted) when the outbox is full."""
        try:
            self.outbox.put_nowait((topic, payload, qos, retain, correlation))
            return True
        except asyncio.QueueFull:
            self.dropped += 1
            return False

    def ack(self, m: Inbound) -> None:
        """Acknowledge a QoS 1 message taken by the callback. After a reconnect the broker has
        already sent it again (unacknowledged), so an ack for an older session is dropped."""
        if m.qos and self._client is not None and m.session == self._session_no:
            self._client._client.ack(m.mid, m.qos)  # aiomqtt has no manual-ack API; paho does

    async def close(self) -> None:
        """Say `offline` (a clean disconnect sends no will) and leave."""
        if self._client is not None and self.connected.is_set():
            try:
                await asyncio.wait_for(
                    self._client.publish(self.topics.status, b"offline", qos=1, retain=True), timeout=3
                )
            except (aiomqtt.MqttError, TimeoutError):
                pass

    # -- the connection loop ------------------------------------------------------------
    async def run(self, on_message: Callable[[Inbound], bool]) -> None:
        """Connect and reconnect until cancelled; each message goes to `on_message`, which must not
        block and returns True when it took the message (it calls `ack` later)."""
        backoff = 1.0
        while True:
            err = await self._session(on_message)
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the client turned our cancellation into an error
                raise asyncio.CancelledError
            self.last_error = str(err)
            if self._maybe_downgrade(err):
                continue
            logger.warning("MQTT link to %s:%d down (%s); retrying in about %.0fs",
                           self.cfg.host, self.cfg.port, err, backoff)
            await asyncio.sleep(backoff * (0.5 + random.random()))  # jitter: no thundering herd
            backoff = 1.0 if self._was_up else min(backoff * 2, 60.0)

    async def _session(self, on_message: Callable[[Inbound], bool]) -> Exception:
        """One connection, from connect to loss; returns why it ended.

        The two loops are plain tasks, not a TaskGroup: on Python 3.11 a failing TaskGroup child
        leaves its parent marked as cancelled, which would end the reconnect loop.
        """
        self._was_up = False
        self._session_no += 1
        try:
            async with self._client_for_attempt() as client:
                self._client = client
                await self._on_connect(client)
                task = asyncio.current_task()
                if task is not None and task.cancelling():  # a stop during subscribe/publish, swallowed
                    raise asyncio.CancelledError
                self._was_up = True
                loops = [asyncio.create_task(self._send(client), name="mqtt-send"),
                         asyncio.create_task(self._receive(client, on_message), name="mqtt-receive")]
                try:
                    done, _ = await asyncio.wait(loops, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for t in loops:
                        t.cancel()
                    await asyncio.gather(*loops, return_exceptions=True)
                for t in done:
                    if t.exception() is not None:
                        raise t.exception()
        except (aiomqtt.MqttError, OSError) as e:
            return e
        finally:
            self.connected.clear()
            self._client = None
        return aiomqtt.MqttError("connection ended")

    def _client_for_attempt(self) -> aiomqtt.Client:
        will = aiomqtt.Will(self.topics.status, b"offline", qos=1, retain=True)
        kw: dict = dict(
            hostname=self.cfg.host, port=self.cfg.port, identifier=self.cfg.client_id, will=will,
            username=self.cfg.username, password=self.cfg.password, keepalive=self.cfg.keepalive_s,
            protocol=self.protocol, timeout=10, max_queued_incoming_messages=10000,
        )
        kw["tls_context"] = tls_context(self.cfg)
        if self.protocol == aiomqtt.ProtocolVersion.V5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = self.cfg.session_expiry_s
            props.ReceiveMaximum = self.cfg.receive_max
            props.MaximumPacketSize = self.cfg.max_packet
            kw.update(clean_start=False, properties=props)
        else:
            kw.update(clean_session=False)
        client = aiomqtt.Client(**kw)
        client._client.manual_ack_set(True)
        return client

    async def _on_connect(self, client: aiomqtt.Client) -> None:
        for topic_filter, qos in self.topics.subscriptions():
            await client.subscribe(topic_filter, qos=qos)
        await client.publish(self.topics.status, b"online", qos=1, retain=True)
        self.connects += 1
        self.connected.set()
        logger.info("MQTT connected to %s:%d as %s (MQTT %s)", self.cfg.host, self.cfg.port, self.cfg.client_id,
                    "5" if self.protocol == aiomqtt.ProtocolVersion.V5 else "3.1.1")

    def _maybe_downgrade(self, err: Exception) -> bool:
        text = str(err).lower()
        # a 3.1.1 broker refuses an MQTT 5 CONNECT, or (amqtt) never answers it
        unsupported = "protocol version" in text or "unsupported protocol" in text or (
            "timed out" in text and not self._was_up and self.connects == 0)
        if self.cfg.protocol == "auto" and self.protocol == aiomqtt.ProtocolVersion.V5 and unsupported:
            logger.info("broker does not speak MQTT 5; using 3.1.1")
            self.protocol = aiomqtt.ProtocolVersion.V311
            return True
        return False

    async def _send(self, client: aiomqtt.Client) -> None:
        while True:
            topic, payload, qos, retain, correlation = await self.outbox.get()
            props = None
            if correlation is not None and self.protocol == aiomqtt.ProtocolVersion.V5:
                props = Properties(PacketTypes.PUBLISH)
                props.CorrelationData = correlation
            try:
                await client.publish(topic, payload, qos=qos, retain=retain, properties=props)
            except ValueError as e:  # a topic no broker accepts (wildcards, NUL): drop it, keep the link
                logger.error("not published to %r: %s", topic, e)
                continue
            except aiomqtt.MqttError:
                if not self.outbox.full():  # not lost: it goes out after the reconnect
                    self.outbox.put_nowait((topic, payload, qos, retain, correlation))
                raise
            if asyncio.current_task().cancelling():  # aiomqtt can swallow a cancel during publish
                raise asyncio.CancelledError

    async def _receive(self, client: aiomqtt.Client, on_message: Callable[[Inbound], bool]) -> None:
        async for m in client.messages:
            props = m.properties
            inbound = Inbound(
                topic=str(m.topic), payload=bytes(m.payload or b""), qos=m.qos,
                response_topic=getattr(props, "ResponseTopic", None) if props else None,
                correlation=getattr(props, "CorrelationData", None) if props else None,
                user=dict(getattr(props, "UserProperty", None) or []) if props else {},
                mid=m.mid, session=self._session_no,
            )
            if not on_message(inbound):  # not taken: done with it
                self.ack(inbound)


def tls_context(cfg: LinkConfig) -> ssl.SSLContext | None:
    """Verify the broker against `tls_ca` (or the system's CAs); present a client certificate if set."""
    if not (cfg.tls or cfg.tls_ca or cfg.tls_cert):
        return None
    ctx = ssl.create_default_context(cafile=cfg.tls_ca)
    if cfg.tls_cert:
        ctx.load_cert_chain(cfg.tls_cert, cfg.tls_key)
    return ctx
