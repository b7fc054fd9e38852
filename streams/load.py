"""Synthetic agents for load and fault tests: captions (QoS 1), audio and frames (QoS 0) at set
rates, and a QoS 1 publisher that survives broker restarts without losing a caption.

Audio and frames use the agreed wire format: MQTT 5 user properties `ts` (UTC epoch ms), `seq`
(per agent) and `id`, payload raw PCM s16le 16 kHz mono / JPEG; over MQTT 3.1.1 the payload is a
one-line JSON header `{"ts","seq","id"}`, a `\\n`, then the bytes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from streams.messages import CaptionMessage
from streams.topics import Topics

logger = logging.getLogger(__name__)

# realistic per-agent rates (messages/s) and sizes; `chorus load --factor 10` multiplies the rates
REALISTIC = {"caption": 0.5, "audio": 2.0, "frame": 1.0}
AUDIO_CHUNK_S = 0.5  # 8,000 samples, 16,000 bytes
FRAME_BYTES = 30_000


@dataclass
class Resilient:
    """QoS 1 publishing that reconnects and sends again whatever was not acknowledged: with
    idempotent message ids a resend is harmless, a loss is not."""

    host: str
    port: int
    client_id: str | None = None
    conn: dict = field(default_factory=dict)
    protocol: aiomqtt.ProtocolVersion = aiomqtt.ProtocolVersion.V5
    reconnects: int = 0
    resent: int = 0
    _client: aiomqtt.Client | None = None
    _stack: object = None

    async def _connect(self) -> aiomqtt.Client:
        while True:
            client = aiomqtt.Client(self.host, self.port, identifier=self.client_id, protocol=self.protocol,
                                    timeout=5, max_inflight_messages=200, **self.conn)
            try:
                await client.__aenter__()
                self._client = client
                return client
            except (aiomqtt.MqttError, OSError):
                await asyncio.sleep(0.3)

    async def publish(self, topic: str, payload: bytes, qos: int = 1, properties: Properties | None = None) -> None:
        first = True
        while True:
            client = self._client or await self._connect()
            try:
                await asyncio.wait_for(client.publish(topic, payload, qos=qos, properties=properties), 10)
                return
            except (aiomqtt.MqttError, TimeoutError, OSError):
                self.resent += first
                first = False
                self.reconnects += 1
                await self._drop()

    async def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.__aexit__(None, None, None)
            except (aiomqtt.MqttError, OSError, TimeoutError):
                pass

    async def close(self) -> None:
        await self._drop()


def caption(agent: str, n: int, ts: int) -> bytes:
    words = ("box", "shelf", "charger", "table", "door", "cup", "drawer", "phone")
    text = f"{agent} moves the {words[n % len(words)]} to spot {n % 40}"
    return CaptionMessage(id=f"{agent}-c{n}", ts=ts, end_ts=ts + 900, text=text).to_bytes()


def media_message(kind: str, seq: int, ts: int, body: bytes, agent: str, v5: bool) -> tuple[bytes, Properties | None]:
    """(payload, properties) for an audio chunk or a frame in the agreed format."""
    mid = f"{agent}-{kind[0]}{seq}"
    if v5:
        props = Properties(PacketTypes.PUBLISH)
        props.UserProperty = [("ts", str(ts)), ("seq", str(seq)), ("id", mid)]
        return body, props
    return json.dumps({"ts": ts, "seq": seq, "id": mid}).encode() + b"\n" + body, None


def pcm_chunk(seconds: float = AUDIO_CHUNK_S, hz: float = 220.0) -> bytes:
    import array

    n = int(16_000 * seconds)
    return array.array("h", (int(3000 * math.sin(2 * math.pi * hz * i / 16_000)) for i in range(n))).tobytes()


def jpeg_like(size: int = FRAME_BYTES) -> bytes:
    """A real JPEG of about `size` bytes (a noisy 320x240 picture, so the daemon stores it like a
    camera frame), padded after its end marker to the size asked."""
    import io

    from PIL import Image

    rng = random.Random(7)
    img = Image.frombytes("RGB", (320, 240), bytes(rng.randrange(256) for _ in range(320 * 240 * 3)))
    buf = io.BytesIO()
    for q in (85, 70, 50, 30, 15):
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=q)
        if buf.tell() <= size:
            break
    data = buf.getvalue()
    return data + b"\0" * max(0, size - len(data))


@dataclass
class LoadReport:
    sent: dict[str, int] = field(default_factory=lambda: {"caption": 0, "audio": 0, "frame": 0})
    bytes: dict[str, int] = field(default_factory=lambda: {"caption": 0, "audio": 0, "frame": 0})
    late_s: float = 0.0  # how far the publisher fell behind its schedule at worst
    seconds: float = 0.0
    caption_ids: list[str] = field(default_factory=list)


async def run_load(host: str, port: int, topics: Topics, *, agents: int, seconds: float, factor: float = 10.0,
                   kinds: tuple[str, ...] = ("caption", "audio", "frame"), conn: dict | None = None,
                   v5: bool = True, base_ts: int | None = None,
                   progress: Callable[[LoadReport], None] | None = None) -> LoadReport:
    """N agents, each sending every kind at `factor` × the realistic rate for `seconds`."""
    rep = LoadReport()
    pcm, frame = pcm_chunk(), jpeg_like()
    names = [f"load{i:02d}" for i in range(agents)]
    base_ts = base_ts or int(time.time() * 1000)
    proto = aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311
    t0 = time.monotonic()

    async def agent_stream(agent: str, kind: str) -> None:
        pub = Resilient(host, port, client_id=f"{agent}-{kind}", conn=conn or {}, protocol=proto)
        period = 1.0 / (REALISTIC[kind] * factor)
        n = 0
        try:
            while (due := n * period) < seconds:
                delay = t0 + due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:
                    rep.late_s = max(rep.late_s, -delay)
                ts = base_ts + int(due * 1000)
                if kind == "caption":
                    payload, props, qos = caption(agent, n, ts), None, 1
                    rep.caption_ids.append(f"{agent}-c{n}")
                else:
                    payload, props = media_message(kind, n, ts, pcm if kind == "audio" else frame, agent, v5)
                    qos = 0
                await pub.publish(topics.agent(agent, kind), payload, qos=qos, properties=props)
                rep.sent[kind] += 1
                rep.bytes[kind] += len(payload)
                n += 1
        finally:
            await pub.close()

    async with asyncio.TaskGroup() as tg:
        for a in names:
            for k in kinds:
                tg.create_task(agent_stream(a, k), name=f"{a}-{k}")
        if progress:
            async def tick():
                while time.monotonic() - t0 < seconds:
                    await asyncio.sleep(1)
                    progress(rep)
            tg.create_task(tick())
    rep.seconds = time.monotonic() - t0
    return rep
