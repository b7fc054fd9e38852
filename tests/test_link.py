"""The MQTT link on its own: protocol fallback, reconnect, persistent session, will and online."""

import asyncio

import aiomqtt
import pytest

from daemon.broker import EmbeddedBroker
from streams.link import Link, LinkConfig
from tests.mqtt_util import Mosquitto, free_port


async def wait_for(cond, timeout=20.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError
        await asyncio.sleep(0.05)


async def test_auto_protocol_falls_back_to_311_on_a_311_only_broker():
    port = free_port()
    broker = EmbeddedBroker("127.0.0.1", port)
    await broker.start()
    got = []
    link = Link(LinkConfig(host="127.0.0.1", port=port, client_id="fallback-test"))
    task = asyncio.create_task(link.run(got.append))
    try:
        await asyncio.wait_for(link.connected.wait(), 60)
        assert link.protocol == aiomqtt.ProtocolVersion.V311
        async with aiomqtt.Client("127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V311) as c:
            await c.publish("chorus/v1/agents/robot1/caption", b'{"id":"1"}', qos=1)
            await wait_for(lambda: got)
        assert got[0].topic == "chorus/v1/agents/robot1/caption" and got[0].payload == b'{"id":"1"}'
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await broker.stop()


async def test_reconnects_after_a_broker_restart_and_keeps_its_session(tmp_path):
    broker = Mosquitto(tmp_path)
    got = []
    link = Link(LinkConfig(host="127.0.0.1", port=broker.port, client_id="session-test"))
    task = asyncio.create_task(link.run(got.append))
    try:
        await asyncio.wait_for(link.connected.wait(), 20)
        async with aiomqtt.Client("127.0.0.1", broker.port) as c:  # the will and `online` are retained
            await c.subscribe("chorus/v1/status", qos=1)
            async for m in c.messages:
                assert m.payload == b"online"
                break
        broker.stop()
        await wait_for(lambda: not link.connected.is_set())
        broker = Mosquitto(tmp_path, port=broker.port)  # persistence on: the session survives
        await asyncio.wait_for(link.connected.wait(), 60)
        assert link.connects == 2
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        async with aiomqtt.Client("127.0.0.1", broker.port) as c:  # while the link is away
            for i in range(20):
                await c.publish("chorus/v1/agents/robot1/caption", f'{{"id":"{i}"}}'.encode(), qos=1)
        task = asyncio.create_task(link.run(got.append))
        await wait_for(lambda: len(got) >= 20, 30)
        assert sorted(int(m.payload[7:-2]) for m in got) == list(range(20))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        broker.stop()


@pytest.mark.parametrize("full", [3])
async def test_outbox_is_bounded_and_counts_drops(full):
    link = Link(LinkConfig(host="127.0.0.1", port=1, outbox=full))
    assert all(link.publish("t", b"x") for _ in range(full))
    assert link.publish("t", b"x") is False and link.dropped == 1
