"""Perception end to end: espeak-ng speech published as MQTT v5 audio to a running daemon becomes
transcripts a question is answered from; JPEG frames (MQTT 3.1.1 header form) are stored, kept
under a small quota, and shown with the answer."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import aiomqtt
import pytest
import sqlean
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from streams.messages import MediaHeader
from tests.media_util import SENTENCES, conversation, jpeg
from tests.mqtt_util import Mosquitto, daemon_env, start_daemon
from tests.test_daemon import ask, collect

pytestmark = pytest.mark.slow
R = "chorus/v1"
T0 = 1735700400000  # DAY1 11:00:00 in Asia/Shanghai
QUOTA = 12_000  # bytes of frames kept


@pytest.fixture
def broker(tmp_path):
    b = Mosquitto(tmp_path)
    yield b
    b.stop()


async def publish_media(port: int, pcm, frames: int) -> None:
    async with aiomqtt.Client("127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V5) as c:
        step = 1600  # 100 ms chunks
        for seq, i in enumerate(range(0, len(pcm), step)):
            props = Properties(PacketTypes.PUBLISH)
            props.UserProperty = MediaHeader(ts=T0 + i // 16, seq=seq).user_properties()
            await c.publish(f"{R}/agents/robot1/audio", pcm[i:i + step].tobytes(), qos=0, properties=props)
            await asyncio.sleep(0.002)
    async with aiomqtt.Client("127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V311) as c:
        for n in range(frames):  # one frame a second, each a few kB
            body = MediaHeader(ts=T0 + n * 1000, seq=n).with_bytes(jpeg((200, 40, 30), (160, 120), noise=30, seed=n))
            await c.publish(f"{R}/agents/robot1/frame", body, qos=0)
        await c.publish(f"{R}/agents/robot1/audio", b'{"ts": 1735700400000, "seq": 9999}\n\x00', qos=0)
        await c.publish(f"{R}/agents/robot1/frame", MediaHeader(ts=T0, seq=10**6).with_bytes(b"GIF89a"), qos=0)


def rows(db, sql):
    c = sqlean.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return c.execute(sql).fetchall()
    finally:
        c.close()


def test_spoken_words_become_transcripts_that_answer_a_question_and_frames_keep_to_their_quota(broker, tmp_path):
    db = tmp_path / "heard.sqlite"
    env = daemon_env(broker.port, CHORUS__SPEECH__THREADS="2", CHORUS__FRAMES__MAX_MB=str(QUOTA / 1e6),
                     CHORUS__FRAMES__RETENTION_EVERY_S="1", CHORUS__FRAMES__EVERY_MS="0",
                     CHORUS__FRAMES__MAX_AGE_H="1000000")  # the frames are dated 2025: age is not tested here
    proc = start_daemon(db, env, tmp_path / "daemon.log")
    pcm = conversation(SENTENCES[:3], gap_s=1.0)
    try:
        asyncio.run(collect(broker.port, [f"{R}/status"], lambda g: any(v == "online" for _, v in g), 120))

        async def scenario():
            errors = asyncio.create_task(collect(broker.port, [f"{R}/errors"], lambda g: len(g) >= 2, 60))
            await asyncio.sleep(0.5)
            await publish_media(broker.port, pcm, frames=12)
            return await errors

        errors = asyncio.run(scenario())
        assert sorted(e["code"] for _, e in errors) == ["bad_frame", "bad_schema"]
        deadline = time.time() + 180
        while time.time() < deadline:
            heard = rows(db, "SELECT text, start_ms FROM observations WHERE kind = 'transcript' ORDER BY start_ms")
            if len(heard) >= 3:
                break
            time.sleep(0.5)
        text = " ".join(t for t, _ in heard).lower()
        assert "charger" in text and "drawer" in text and "umbrella" in text, heard
        assert all(T0 <= ms <= T0 + len(pcm) // 16 for _, ms in heard)  # in stream time
        answer = asyncio.run(ask(broker.port, {
            "id": "heard-1", "question": "Where did I put the red charger?", "asker": "robot1",
            "options": ["in the kitchen drawer", "on the sofa", "on the balcony", "behind the door"],
            "as_of": "DAY1 11:05:00", "reply_to": "test/heard/1"}, "test/heard/1"))
        assert answer["status"] == "ok" and answer["choice"] in "ABCD"
        assert any("charger" in e["text"] for e in answer["evidence"] if e["agent"] == "robot1")
        assert answer["frames"] and all(f["agent"] == "robot1" for f in answer["frames"])
        assert all(f["why"] == "near_evidence" for f in answer["frames"])
        deadline = time.time() + 30
        while time.time() < deadline and rows(db, "SELECT COALESCE(SUM(bytes), 0) FROM frames")[0][0] > QUOTA:
            time.sleep(0.5)
        kept = rows(db, "SELECT path, bytes, ts_ms FROM frames ORDER BY ts_ms")
        assert 0 < sum(b for _, b, _ in kept) <= QUOTA and kept[-1][2] == T0 + 11_000  # the newest stay
        on_disk = sorted(p for p in (tmp_path / "heard.sqlite.frames").rglob("*.jpg"))
        assert len(on_disk) == len(kept) and sum(p.stat().st_size for p in on_disk) <= QUOTA
        stats = asyncio.run(collect(broker.port, [f"{R}/stats"], lambda g: len(g) >= 1, 30))[0][1]
        assert stats["speech"]["transcripts"] >= 3 and stats["frames"]["stored"] == 12
        assert json.dumps(stats)  # counters only, serialisable
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
