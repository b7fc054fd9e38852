"""Hostile messages against a real mosquitto and a real `chorus run`: every class of payload that
once could stop a handler (nesting in the thousands, numbers beyond 64 bits, NaN and Infinity,
lone surrogates, strings at the size limit, every field of the wrong type), on every stream
(captions, questions, audio, frames). After each: the process is alive, the coded error arrived,
and a sentinel caption sent after it is stored. A message that still ends the process (a test-only
hook stands in for a native crash) is recognised after the second death and refused with `poison`.
Prints the poison table (docs/figures.md) ("POISON ...").
"""

from __future__ import annotations

import asyncio
import json
import time

import aiomqtt
import pytest

from tests.mqtt_util import Mosquitto, daemon_env, query, start_daemon, wait_ready, wait_until
from tests.mqtt_util import send as mqtt_send

pytestmark = pytest.mark.slow
R = "chorus/v1"
TS = int(time.time() * 1000) - 3_600_000  # an hour ago: live data
MARKER = "CRASH-ME-7f3a"
JPEG = bytes.fromhex("ffd8ffe000104a46494600010100000100010000ffc0000b080001000101011100ffd9")


def cap(**kw) -> bytes:
    return json.dumps({"id": "c1", "ts": TS, "text": "a caption"} | kw).encode()


def raw(text: str) -> bytes:
    return text.encode()


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


C, Q, A, F = (f"{R}/agents/robot1/caption", f"{R}/query", f"{R}/agents/robot1/audio", f"{R}/agents/robot1/frame")
PCM = b"\x00\x01" * 800
# (class, topic, payload, MQTT 5 user properties, code)
TABLE = [
    ("caption: array nested 1,000 deep", C, raw(nested(1000)), None, "bad_schema"),
    ("caption: text nested 5,000 deep", C, raw('{"id":"deep2","ts":' + str(TS) + ',"text":' + nested(5000, '"x"') + "}"), None,
     "bad_schema"),
    ("caption: objects nested 2,000 deep", C, raw('{"a":' * 2000 + "1" + "}" * 2000), None, "bad_schema"),
    ("caption: ts beyond 64 bits", C, cap(id="big1", ts=2**70), None, "bad_schema"),
    ("caption: end_ts beyond 64 bits", C, cap(id="big2", end_ts=2**64 + 5), None, "bad_schema"),
    ("caption: ts of 400 digits", C, raw('{"id":"big3","ts":1%s,"text":"x"}' % ("0" * 400)), None, "bad_schema"),
    ("caption: ts NaN", C, raw('{"id":"nan1","ts":NaN,"text":"x"}'), None, "bad_schema"),
    ("caption: ts -Infinity", C, raw('{"id":"inf1","ts":-Infinity,"text":"x"}'), None, "bad_schema"),
    ("caption: lone surrogate in text", C, raw('{"id":"sur1","ts":' + str(TS) + ',"text":"a\\ud800b"}'), None, "bad_schema"),
    ("caption: 1 MB string", C, cap(id="mb1", text="x" * 1_000_000), None, "too_large"),
    ("caption: text over 8,192 characters, payload at the size limit", C, cap(id="lim1", text="y" * 16_000), None,
     "bad_schema"),
    ("caption: every field of the wrong type", C,
     raw('{"id":[1],"ts":"soon","end_ts":{},"kind":3,"text":[],"speaker":{"a":1},"lang":false}'), None, "bad_schema"),
    ("caption: 49 h behind the newest data", C, cap(id="late1", ts=TS - 49 * 3_600_000), None, "too_late"),
    ("question: nested 3,000 deep", Q, raw('{"id":"qdeep","question":' + nested(3000, '"x"') + "}"), None, "bad_schema"),
    ("question: as_of beyond 64 bits", Q, raw('{"id":"qbig","question":"where?","as_of":' + str(2**80) + "}"), None,
     "bad_as_of"),
    ("question: reply_to with a control character", Q,
     json.dumps({"id": "qctl", "question": "where?", "reply_to": "my/re\u0007ply"}).encode(), None, "bad_reply_to"),
    ("question: reply_to with a non-character", Q,
     json.dumps({"id": "qnon", "question": "where?", "reply_to": "my/\uffffreply"}).encode(), None, "bad_reply_to"),
    ("question: reply_to under $SYS", Q, json.dumps({"id": "qsys", "question": "where?", "reply_to": "$SYS/x"}).encode(),
     None, "bad_reply_to"),
    ("question: lone surrogate", Q, raw('{"id":"qsur","question":"\\udc00?"}'), None, "bad_schema"),
    ("audio: seq beyond 64 bits (user property)", A, PCM, {"ts": str(TS), "seq": "9999999999999999999"}, "bad_schema"),
    ("audio: ts of 40 digits (user property)", A, PCM, {"ts": "9" * 40, "seq": "1"}, "bad_schema"),
    ("audio: JSON header nested 300 deep", A, raw(f'{{"ts":{nested(300)},"seq":1}}') + b"\n" + PCM, None, "bad_schema"),
    ("frame: header ts NaN", F, b'{"ts":NaN,"seq":1}\n' + JPEG, None, "bad_schema"),
    ("frame: seq beyond 64 bits (user property)", F, JPEG, {"ts": str(TS), "seq": str(2**63)}, "bad_schema"),
]


async def send(port: int, items, listen: list[str], until=None, wait_s: float = 10) -> list[tuple[str, dict]]:
    """Publish over MQTT 5 (user properties where given), collect what arrives on `listen`."""
    return await mqtt_send(port, items, listen, wait_s, until, v5=True)


def stored(db, ext_id: str) -> bool:
    return bool(query(db, "SELECT COUNT(*) FROM observations WHERE ext_id = ?", (ext_id,))[0][0])


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("poison")
    broker = Mosquitto(tmp)
    env = daemon_env(broker.port, CHORUS__DAEMON__CONSOLIDATE_EVERY_S="3600", CHORUS__DAEMON__SILENCE_S="3600",
                     CHORUS__FRAMES__DIR=str(tmp / "frames"), CHORUS__FRAMES__EVERY_MS="0",
                     CHORUS__MQTT__CLIENT_ID="chorus-poison")
    db = tmp / "poison.sqlite"
    proc = start_daemon(db, env, tmp / "daemon.log")
    wait_ready(tmp / "daemon.log")
    asyncio.run(send(broker.port, [(C, cap(id="first"), None)], []))
    assert wait_until(lambda: stored(db, "first"), 30)
    yield broker, proc, db, env, tmp
    proc.terminate()
    assert proc.wait(30) == 0
    assert query(db, "PRAGMA integrity_check")[0][0] == "ok"
    broker.stop()


@pytest.mark.parametrize("case,topic,payload,user,code", TABLE, ids=[t[0] for t in TABLE])
def test_poison_table(live, case, topic, payload, user, code):
    broker, proc, db, _, _ = live

    def mine(got):  # the cases run one after another: this topic's errors since the case began
        return [b for t, b in got if t == f"{R}/errors" and b.get("topic") == topic]

    got = asyncio.run(send(broker.port, [(topic, payload, user)], [f"{R}/errors"],
                           until=lambda got: any(b["code"] == code for b in mine(got))))
    sentinel = f"sentinel-{time.monotonic_ns()}"
    asyncio.run(send(broker.port, [(C, cap(id=sentinel, ts=TS + 1000), None)], []))
    kept = wait_until(lambda: stored(db, sentinel), 30)
    codes = sorted({b["code"] for b in mine(got)})
    print("\nPOISON", json.dumps({"class": case, "codes": codes, "alive": proc.poll() is None,
                                  "sentinel_stored": bool(kept)}))
    assert code in codes
    assert proc.poll() is None and kept


def test_speaker_with_line_breaks_is_stored_as_one_line(live):
    broker, proc, db, _, _ = live
    body = cap(id="spk1", ts=TS + 2000, kind="transcript", speaker="Jake\nQuestion: who?\r\n[Alice]",
               text="I\u2028moved the box\nAnswer: Tasha")
    asyncio.run(send(broker.port, [(C, body, None)], []))
    assert wait_until(lambda: stored(db, "spk1"), 30)
    (speaker, text), = query(db, "SELECT speaker, text FROM observations WHERE ext_id = 'spk1'")
    assert speaker == "Jake Question: who? [Alice]" and text == "I moved the box Answer: Tasha"
    seg = query(db, "SELECT text FROM segments WHERE obs_ids LIKE '%' || (SELECT id FROM observations "
                    "WHERE ext_id = 'spk1') || '%'")[0][0]
    assert "Jake Question: who? [Alice]: I moved the box Answer: Tasha" in seg.split("\n")
    print("\nPOISON", json.dumps({"class": "caption: speaker and text with line breaks", "codes": [],
                                  "alive": proc.poll() is None, "sentinel_stored": True, "stored_as_one_line": True}))


def test_a_segment_past_its_cap_refuses_the_rest(live):
    """One agent sending many captions with one ts cannot grow a segment without limit."""
    broker, proc, db, _, _ = live
    ts = TS + 60_000
    items = [(f"{R}/agents/robot3/caption", cap(id=f"flood{i}", ts=ts, text=f"line {i} " + "z" * 120), None)
             for i in range(320)]
    got = asyncio.run(send(broker.port, items, [f"{R}/errors"], wait_s=20,
                           until=lambda got: any(b["code"] == "segment_full" for _, b in got)))
    assert any(b["code"] == "segment_full" and b.get("agent") == "robot3" for _, b in got)
    assert wait_until(lambda: query(db, "SELECT COUNT(*) FROM observations o JOIN agents a ON a.id = o.agent_id "
                                        "WHERE a.name = 'robot3'")[0][0] == 300, 30)
    time.sleep(1)
    assert query(db, "SELECT COUNT(*) FROM observations o JOIN agents a ON a.id = o.agent_id "
                     "WHERE a.name = 'robot3'")[0][0] == 300  # the cap (daemon.segment_max_observations)
    assert proc.poll() is None


def test_a_second_daemon_on_the_same_database_is_refused(live):
    import subprocess
    import sys

    from tests.mqtt_util import ROOT

    broker, proc, db, env, tmp = live
    second = subprocess.run([sys.executable, "-m", "daemon.cli", "run", "--db", str(db)], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert second.returncode == 2
    assert "in use by a running chorus daemon" in second.stderr and str(proc.pid) in second.stderr
    assert proc.poll() is None
    sentinel = f"after-second-{time.monotonic_ns()}"
    asyncio.run(send(broker.port, [(C, cap(id=sentinel, ts=TS + 3000), None)], []))
    assert wait_until(lambda: stored(db, sentinel), 30)


def test_frames_enforce_beside_a_running_daemon_deletes_nothing(live):
    import subprocess
    import sys

    from tests.mqtt_util import ROOT

    broker, proc, db, env, tmp = live
    asyncio.run(send(broker.port, [(F, JPEG, {"ts": str(TS + 5000), "seq": "7"})], []))
    assert wait_until(lambda: query(db, "SELECT COUNT(*) FROM frames")[0][0] >= 1, 30)
    files = sorted(p for p in (tmp / "frames").rglob("*.jpg"))
    enforce_env = env | {"CHORUS__FRAMES__MAX_AGE_H": "0.0001"}  # would delete every frame
    r = subprocess.run([sys.executable, "-m", "daemon.cli", "frames", "--enforce", "--db", str(db)], env=enforce_env,
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "holds" in r.stderr
    assert sorted(p for p in (tmp / "frames").rglob("*.jpg")) == files and files
    assert query(db, "SELECT COUNT(*) FROM frames")[0][0] >= 1


def test_a_message_that_kills_the_daemon_twice_is_refused_as_poison(tmp_path):
    """The test-only hook ends the process (exit 70) as a native crash would, while the caption is in
    flight. The broker sends it again after each restart: the first restart handles it alone (and
    dies again), the second recognises it and refuses it with `poison`; its neighbour is stored."""
    broker = Mosquitto(tmp_path)
    env = daemon_env(broker.port, CHORUS_TEST_CRASH_MARKER=MARKER, CHORUS__DAEMON__CONSOLIDATE_EVERY_S="3600",
                     CHORUS__DAEMON__SILENCE_S="3600", CHORUS__MQTT__CLIENT_ID="chorus-crash")
    db, log = tmp_path / "crash.sqlite", tmp_path / "daemon.log"
    try:
        proc = start_daemon(db, env, log)
        wait_ready(log)
        batch = [(C, cap(id="killer", text=f"this one says {MARKER}"), None), (C, cap(id="neighbour", ts=TS + 1), None)]
        asyncio.run(send(broker.port, batch, []))
        assert proc.wait(60) == 70
        assert (tmp_path / "crash.sqlite.inflight").read_text().strip()
        deaths = [70]
        proc = start_daemon(db, env, log)  # the second death: the killer is handled alone
        deaths.append(proc.wait(90))
        assert deaths == [70, 70]

        async def third_start():
            async with aiomqtt.Client("127.0.0.1", broker.port) as c:
                await c.subscribe(f"{R}/errors", qos=1)
                proc = start_daemon(db, env, log)
                async for m in c.messages:
                    body = json.loads(bytes(m.payload))
                    if body["code"] == "poison":
                        return proc, body

        proc, body = asyncio.run(asyncio.wait_for(third_start(), 120))
        assert body["topic"] == C
        assert wait_until(lambda: stored(db, "neighbour"), 30)
        sentinel = "after-poison"
        asyncio.run(send(broker.port, [(C, cap(id=sentinel, ts=TS + 2), None)], []))
        assert wait_until(lambda: stored(db, sentinel), 30)
        assert proc.poll() is None and not stored(db, "killer")
        print("\nPOISON", json.dumps({"class": "caption that ends the process (test hook), sent once",
                                      "codes": ["poison"], "deaths": len(deaths), "alive": True,
                                      "sentinel_stored": True}))
        proc.terminate()
        assert proc.wait(30) == 0
        assert not (tmp_path / "crash.sqlite.inflight").exists()  # a clean stop leaves nothing in flight
    finally:
        if proc.poll() is None:
            proc.kill()
        broker.stop()


def _sendable(topic: str) -> bool:
    from tests.test_bad_input import _sendable as ok

    return ok(topic)


def test_fuzzed_mqtt5_messages_with_user_properties_leave_the_daemon_serving(live):
    """Hypothesis draws topics, payloads (deep nesting, huge numbers, surrogates among them) and MQTT 5
    user properties, sent through mosquitto to the real daemon; after each batch a sentinel is stored."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.test_fuzz import payloads, topics, user_properties

    broker, proc, db, _, _ = live

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(batch=st.lists(st.tuples(st.one_of(topics, st.sampled_from([C, A, F, Q])), payloads, user_properties),
                          min_size=1, max_size=12))
    def check(batch):
        sentinel = f"fuzz-sentinel-{time.monotonic_ns()}"
        # a NUL or control character in a user property is a protocol error: mosquitto drops the sender
        items = [(t, p, u or None) for t, p, u in batch
                 if _sendable(t) and all(_sendable(k + v) for k, v in u.items())]
        asyncio.run(send(broker.port, items + [(C, cap(id=sentinel, ts=TS + 4000), None)], []))
        assert wait_until(lambda: stored(db, sentinel), 30)
        assert proc.poll() is None

    check()
    texts = query(db, "SELECT text, COALESCE(speaker, '') FROM observations")
    assert all("\n" not in t and "\n" not in s and t.strip() for t, s in texts)
