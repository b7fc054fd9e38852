"""The live daemon against a real mosquitto: replay, windows, events, questions, restarts."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time

import aiomqtt
import pytest
import sqlean

from tests.mqtt_util import ROOT, Mosquitto, daemon_env, start_daemon

pytestmark = pytest.mark.slow
R = "chorus/v1"


@pytest.fixture
def broker(tmp_path):
    b = Mosquitto(tmp_path)
    yield b
    b.stop()


async def collect(port: int, topics: list[str], until, timeout: float) -> list[tuple[str, dict | str]]:
    got: list = []
    async with aiomqtt.Client("127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V311) as c:
        for t in topics:
            await c.subscribe(t, qos=1)

        async def loop():
            async for m in c.messages:
                raw = bytes(m.payload).decode()
                try:
                    got.append((str(m.topic), json.loads(raw)))
                except ValueError:
                    got.append((str(m.topic), raw))
                if until(got):
                    return

        await asyncio.wait_for(loop(), timeout)
    return got


async def ask(port: int, body: dict, reply: str, timeout: float = 240) -> dict:
    async with aiomqtt.Client("127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V311) as c:
        await c.subscribe(reply, qos=1)
        await c.publish(f"{R}/query", json.dumps(body), qos=1)

        async def loop():
            async for m in c.messages:
                d = json.loads(bytes(m.payload))
                if d.get("status") in ("ok", "error"):
                    return d

        return await asyncio.wait_for(loop(), timeout)


async def replay_and_collect(port: int, args: list[str], until, timeout: float) -> list:
    """Listen on `events` while a replay runs in another process."""
    listener = asyncio.create_task(collect(port, [f"{R}/events"], until, timeout))
    await asyncio.sleep(1.0)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "daemon.cli", "replay", *args, "--port", str(port), "--speed", "1000000",
        cwd=ROOT, env=daemon_env(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert await proc.wait() == 0
    return await listener


def test_replay_windows_events_and_an_answer_from_two_agents(broker, tmp_path, egolife):
    db = tmp_path / "live.sqlite"
    proc = start_daemon(db, daemon_env(broker.port), tmp_path / "daemon.log")
    try:
        status = asyncio.run(collect(broker.port, [f"{R}/status"], lambda g: any(v == "online" for _, v in g), 120))
        assert status[-1][1] == "online"
        events = asyncio.run(replay_and_collect(broker.port, [
            "egolife", str(egolife / "EgoLifeCap"), "--days", "1", "--agents", "A1_JAKE,A2_ALICE,A4_LUCIA",
            "--limit", "6000"], lambda g: len(g) >= 2, 400))
        assert all({"who", "what", "start", "end"} <= set(e) for _, e in events)
        answer = asyncio.run(ask(broker.port, {
            "id": "q-1", "question": "Who used the screwdriver first?", "options": ["Tasha", "Alice", "Shure", "Lucia"],
            "as_of": "DAY1 11:59:00", "reply_to": "test/answers/q-1",
        }, "test/answers/q-1"))
        assert answer["id"] == "q-1" and answer["status"] == "ok" and answer["choice"] in "ABCD"
        assert len({e["agent"] for e in answer["evidence"]}) >= 2
        assert all(e["end"] <= "2025-01-01T11:59:00+08:00" for e in answer["evidence"])
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    log = (tmp_path / "daemon.log").read_text()
    assert "ready" in log
    c = sqlean.connect(str(db))
    assert c.execute("SELECT COUNT(DISTINCT agent_id) FROM observations").fetchone()[0] == 3


def test_bad_input_gets_a_coded_error_and_the_daemon_keeps_serving(broker, tmp_path):
    db = tmp_path / "bad.sqlite"
    proc = start_daemon(db, daemon_env(broker.port), tmp_path / "daemon.log")
    try:
        asyncio.run(collect(broker.port, [f"{R}/status"], lambda g: any(v == "online" for _, v in g), 120))

        async def scenario():
            async with aiomqtt.Client("127.0.0.1", broker.port, protocol=aiomqtt.ProtocolVersion.V311) as c:
                await c.subscribe(f"{R}/errors", qos=0)
                await c.subscribe("test/bad/#", qos=1)
                await c.publish(f"{R}/agents/robot1/caption", b"{not json", qos=1)
                await c.publish(f"{R}/agents/robot1/caption", json.dumps({"id": "x", "ts": "soon", "text": "t"}), qos=1)
                await c.publish(f"{R}/agents/robot1/caption", json.dumps({"id": "y", "ts": 5, "text": "t"}), qos=1)
                await c.publish(f"{R}/agents/ro..bot/caption", json.dumps({"id": "z", "ts": 1735700000000,
                                                                            "text": "t"}), qos=1)
                await c.publish(f"{R}/query", json.dumps({"id": "q2", "question": "hi", "as_of": "year 3000",
                                                          "reply_to": "test/bad/q2"}), qos=1)
                await c.publish(f"{R}/query", json.dumps({"id": "q3", "question": "hi",
                                                          "reply_to": f"{R}/agents/robot1/caption"}), qos=1)
                await c.publish(f"{R}/agents/robot1/caption", json.dumps(
                    {"id": "ok1", "ts": 1735700000000, "text": "I put the charger in the drawer"}), qos=1)
                codes, reply = set(), None
                async for m in c.messages:
                    d = json.loads(bytes(m.payload))
                    if str(m.topic).startswith("test/bad"):
                        reply = d
                    else:
                        codes.add(d["code"])
                    if reply and len(codes) >= 5 or len(codes) > 5:
                        return codes, reply

        codes, reply = asyncio.run(asyncio.wait_for(scenario(), 60))
        assert codes == {"bad_schema", "bad_topic", "bad_as_of", "bad_time", "bad_reply_to"}
        assert reply["status"] == "error" and reply["code"] == "bad_as_of" and reply["id"] == "q2"
        deadline = time.time() + 30
        while time.time() < deadline:
            c = sqlean.connect(str(db))
            if c.execute("SELECT COUNT(*) FROM observations").fetchone()[0] == 1:
                break
            time.sleep(0.5)
        assert c.execute("SELECT text FROM observations").fetchone()[0] == "I put the charger in the drawer"
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_captions_sent_while_down_arrive_once_after_restart(broker, tmp_path):
    db = tmp_path / "restart.sqlite"
    env = daemon_env(broker.port, CHORUS__MQTT__CLIENT_ID="chorus-restart-test")
    proc = start_daemon(db, env, tmp_path / "d1.log")
    asyncio.run(collect(broker.port, [f"{R}/status"], lambda g: any(v == "online" for _, v in g), 120))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0

    async def publish_while_down():
        async with aiomqtt.Client("127.0.0.1", broker.port, protocol=aiomqtt.ProtocolVersion.V311) as c:
            for i in range(300):
                body = {"id": f"m{i}", "ts": 1735700000000 + i * 1000, "text": f"caption number {i}"}
                await c.publish(f"{R}/agents/robot{i % 3}/caption", json.dumps(body), qos=1)
            for i in range(50):  # resends of the same captions
                body = {"id": f"m{i}", "ts": 1735700000000 + i * 1000, "text": f"caption number {i}"}
                await c.publish(f"{R}/agents/robot{i % 3}/caption", json.dumps(body), qos=1)

    asyncio.run(publish_while_down())
    proc = start_daemon(db, env, tmp_path / "d2.log")
    try:
        deadline = time.time() + 120
        n = 0
        while time.time() < deadline:
            c = sqlean.connect(str(db))
            n = c.execute("SELECT COUNT(*) FROM observations").fetchone()[0]
            c.close()
            if n >= 300:
                break
            time.sleep(0.5)
        time.sleep(2)
        c = sqlean.connect(str(db))
        assert c.execute("SELECT COUNT(*) FROM observations").fetchone()[0] == 300
        assert c.execute("SELECT COUNT(DISTINCT agent_id || ext_id) FROM observations").fetchone()[0] == 300
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_embedded_broker_when_none_is_configured_and_chat_gets_answers(tmp_path, slice_db):
    import shutil

    from tests.mqtt_util import free_port, wait_port

    db = tmp_path / "emb.sqlite"
    shutil.copy(slice_db, db)
    port = free_port()
    env = daemon_env(port)
    del env["CHORUS__MQTT__HOST"]  # nothing configured, nothing listening on that port
    proc = start_daemon(db, env, tmp_path / "daemon.log")
    try:
        wait_port(port, 60)
        deadline = time.time() + 120
        while "ready" not in (tmp_path / "daemon.log").read_text() and time.time() < deadline:
            time.sleep(0.5)
        assert "embedded broker" in (tmp_path / "daemon.log").read_text()
        chat = subprocess.run(
            [sys.executable, "-m", "daemon.cli", "chat"], cwd=ROOT, env=env, capture_output=True, text=True,
            input="Who used the screwdriver first? | Tasha | Alice | Shure | Lucia\n", timeout=300,
        )
        assert chat.returncode == 0, chat.stderr
        assert "daemon at 127.0.0.1" in chat.stderr
        first = chat.stdout.strip().splitlines()[0].removeprefix("? ")
        assert first[:2] in ("A.", "B.", "C.", "D."), chat.stdout
        assert "DAY1 11:" in chat.stdout  # evidence with agent and local time
        # asked as of a moment of the recording: nothing later is evidence
        chat = subprocess.run(
            [sys.executable, "-m", "daemon.cli", "chat", "--as-of", "DAY1 11:21:02"], cwd=ROOT, env=env,
            capture_output=True, text=True, input="Who used the screwdriver first? | Tasha | Alice | Shure | Lucia\n",
            timeout=300,
        )
        assert chat.returncode == 0, chat.stderr
        assert "as of DAY1 11:21:02" in chat.stderr
        shown = re.findall(r"DAY1 (\d\d:\d\d:\d\d)", chat.stdout)
        assert shown and max(shown) < "11:21:02", chat.stdout
        bad = subprocess.run([sys.executable, "-m", "daemon.cli", "chat", "--as-of", "tea time"], cwd=ROOT, env=env,
                             capture_output=True, text=True, input="", timeout=60)
        assert bad.returncode != 0 and "--as-of" in bad.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_mqtt5_response_topic_correlation_and_streamed_chunks(broker, tmp_path):
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    proc = start_daemon(tmp_path / "v5.sqlite", daemon_env(broker.port), tmp_path / "daemon.log")
    try:
        asyncio.run(collect(broker.port, [f"{R}/status"], lambda g: any(v == "online" for _, v in g), 120))

        async def scenario():
            async with aiomqtt.Client("127.0.0.1", broker.port, protocol=aiomqtt.ProtocolVersion.V5) as c:
                await c.subscribe("test/v5/#", qos=1)
                props = Properties(PacketTypes.PUBLISH)
                props.ResponseTopic = "test/v5/replies"
                props.CorrelationData = b"corr-42"
                body = {"id": "v5-1", "question": "Where is the charger?", "as_of": "DAY1 12:00", "stream": True}
                await c.publish(f"{R}/query", json.dumps(body), qos=1, properties=props)
                got = []
                async for m in c.messages:
                    got.append((str(m.topic), json.loads(bytes(m.payload)), m.properties.CorrelationData))
                    if got[-1][1].get("status") in ("ok", "error"):
                        return got

        got = asyncio.run(asyncio.wait_for(scenario(), 180))
        assert [t for t, _, _ in got] == ["test/v5/replies"] * len(got)
        assert all(corr == b"corr-42" for _, _, corr in got)
        assert got[0][1]["status"] == "working" and got[-1][1]["status"] == "ok"
        assert all(d["id"] == "v5-1" for _, d, _ in got)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
