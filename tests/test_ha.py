"""Home Assistant MQTT discovery through a real mosquitto and a real daemon: the retained configs
hold what HA requires, their templates render (Jinja2, as HA renders them) on what the daemon
publishes, asking through the `text` entity gives the answer sensor, and turning discovery off
removes the configs."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from datetime import datetime

import aiomqtt
import pytest

from tests.mqtt_util import Mosquitto, free_port, start_daemon, wait_ready, wait_until
from tests.web_util import seeded_copy, web_env

pytestmark = pytest.mark.slow
jinja2 = pytest.importorskip("jinja2", reason="jinja2 renders HA's templates here (pip install jinja2; a test extra)")
R = "chorus/v1"
# per component: the keys HA's MQTT integration requires, and those a discovered device needs
REQUIRED = {"sensor": {"state_topic"}, "binary_sensor": {"state_topic"}, "text": {"command_topic"}}
COMMON = {"name", "unique_id", "device"}


def render(template: str, **values) -> str:
    return jinja2.Environment().from_string(template).render(**values)


async def retained(port: int, topic: str, settle: float = 2.0) -> dict[str, bytes]:
    """Every retained message under `topic` (they arrive at once on subscribe)."""
    got: dict[str, bytes] = {}
    async with aiomqtt.Client("127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V311) as c:
        await c.subscribe(topic, qos=1)
        try:
            async with asyncio.timeout(settle):
                async for m in c.messages:
                    if m.retain:
                        got[str(m.topic)] = bytes(m.payload)
        except TimeoutError:
            pass
    return got


async def ask_via_text(port: int, cfg: dict, question: str, answer_topic: str) -> dict:
    payload = render(cfg["command_template"], value=question)  # what HA publishes when the text is set
    async with aiomqtt.Client("127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V311) as c:
        await c.subscribe(answer_topic, qos=1)
        await c.publish(cfg["command_topic"], payload, qos=1)
        async with asyncio.timeout(600):
            async for m in c.messages:
                body = json.loads(bytes(m.payload))
                if body.get("status") in ("ok", "error"):
                    return body


def wait_configs(port: int, n: int, timeout: float = 60) -> dict[str, bytes]:
    async def go():
        async with asyncio.timeout(timeout):
            while True:
                got = await retained(port, "homeassistant/#")
                if len([v for v in got.values() if v]) >= n:
                    return got
    return asyncio.run(go())


@pytest.fixture
def broker(tmp_path):
    b = Mosquitto(tmp_path)
    yield b
    b.stop()


def test_discovery_configs_asking_and_removal(tmp_path, slice_db, clock, broker):
    db = seeded_copy(slice_db, tmp_path, clock)  # its windows consolidated: no model time spent on them
    env = web_env(broker.port, free_port(), CHORUS__WEB__ENABLED="false", CHORUS__HA__DISCOVERY="true",
                  CHORUS__ANSWER__ANSWER_TOKENS="48")
    log = tmp_path / "d1.log"
    proc = start_daemon(db, env, log)
    try:
        wait_ready(log, 180)
        configs = {t: json.loads(v) for t, v in wait_configs(broker.port, 7).items()}
        assert len(configs) == 7
        ids = set()
        for topic, cfg in configs.items():
            m = re.fullmatch(r"homeassistant/(sensor|binary_sensor|text)/([A-Za-z0-9_-]+)/([A-Za-z0-9_-]+)/config",
                             topic)
            assert m, topic
            comp = m.group(1)
            assert REQUIRED[comp] | COMMON <= set(cfg), (topic, set(cfg))
            assert cfg["device"]["identifiers"] == ["chorus_chorus"] and cfg["device"]["name"] == "Chorus"
            assert cfg["unique_id"] not in ids
            ids.add(cfg["unique_id"])
            if topic.endswith("/online/config"):
                assert cfg["state_topic"] == f"{R}/status" and cfg["payload_on"] == "online"
            else:
                assert cfg["availability"] == [{"topic": f"{R}/status", "payload_available": "online",
                                                "payload_not_available": "offline"}]
        by = {t.split("/")[-2]: c for t, c in configs.items()}
        assert set(by) == {"online", "captions", "windows_pending", "agents_online", "last_answer",
                           "last_answer_time", "ask"}

        state = asyncio.run(retained(broker.port, f"{R}/ha/state"))
        value_json = json.loads(state[f"{R}/ha/state"])
        assert int(render(by["captions"]["value_template"], value_json=value_json)) > 1000
        assert int(render(by["windows_pending"]["value_template"], value_json=value_json)) >= 0
        assert render(by["agents_online"]["value_template"], value_json=value_json) == "0"
        assert json.loads(render(by["agents_online"]["json_attributes_template"], value_json=value_json)) == \
            {"agents": []}
        assert asyncio.run(retained(broker.port, f"{R}/status"))[f"{R}/status"] == b"online"

        answer = asyncio.run(ask_via_text(broker.port, by["ask"], "What did Jake do with the screwdriver?",
                                          by["last_answer"]["state_topic"]))
        assert answer["status"] == "ok" and answer["id"] == "ha", answer
        shown = render(by["last_answer"]["value_template"], value_json=answer)
        assert shown and len(shown) <= 255 and shown == answer["answer"][:250]
        attrs = json.loads(render(by["last_answer"]["json_attributes_template"], value_json=answer))
        assert attrs["question"] == "What did Jake do with the screwdriver?" and attrs["evidence"]
        when = render(by["last_answer_time"]["value_template"], value_json=answer)
        assert datetime.fromisoformat(when).tzinfo is not None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    assert (tmp_path / "memory.sqlite.ha-discovery").exists()

    log2 = tmp_path / "d2.log"
    proc = start_daemon(db, env | {"CHORUS__HA__DISCOVERY": "false"}, log2)
    try:
        wait_ready(log2, 180)

        def gone():
            return not asyncio.run(retained(broker.port, "homeassistant/#")) and \
                f"{R}/ha/state" not in asyncio.run(retained(broker.port, f"{R}/ha/#"))

        assert wait_until(gone, 30), asyncio.run(retained(broker.port, "homeassistant/#"))
        assert not (tmp_path / "memory.sqlite.ha-discovery").exists()
        assert "Home Assistant discovery off: 7 entities removed" in log2.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
