"""Property-based fuzzing of everything a sender controls: topics and payloads of agent messages and
questions. In process, through the daemon's own routing, ingestion and question desk (fast, many
examples); `test_bad_input.py` sends a hypothesis-drawn batch through a real broker and daemon.

The properties: nothing raises; every message is stored, queued or answered, or gets an error whose
code is a known one; what is stored is plausible (time, one line of text); an answer never lands on
an agent's stream or the daemon's own topics.
"""

from __future__ import annotations

import asyncio
import json
from typing import get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assistant.answer import Answerer
from assistant.config import AnswerSettings
from daemon import build
from daemon.app import Daemon
from daemon.ingestor import Ingestor
from daemon.questions import QuestionDesk
from daemon.settings import load_settings
from memory.clock import HouseClock
from memory.store import Store
from models.llm import Usage
from streams.link import Inbound
from streams.topics import Topics
from streams.wire import EPOCH_2000_MS

KNOWN = {"bad_schema", "bad_encoding", "bad_topic", "bad_time", "too_large", "bad_input", "not_allowed",
         "rate_limited", "unsupported", "bad_as_of", "bad_reply_to", "queue_full", "bad_record",
         "audio_gap", "audio_backlog", "bad_frame", "model_error",  # these four from perception
         "too_late", "segment_full", "poison", "store_failed", "disk_full", "speech_failed", "frames_failed"}
R = "chorus/v1"
CLOCK = HouseClock.of("2025-01-01", "UTC")
STORE = Store(":memory:")


class FakeLink:
    topics = Topics(R)

    def __init__(self):
        self.sent: list[tuple[str, bytes]] = []
        self.acked: list[Inbound] = []

    def publish(self, topic, payload, *, qos=0, retain=False, correlation=None) -> bool:
        self.sent.append((topic, payload))
        return True

    def ack(self, m: Inbound) -> None:
        self.acked.append(m)


class EchoLLM:
    """Answers every question with its first option: the desk, not the model, is under test."""

    name = "echo"

    def count(self, text: str) -> int:
        return max(1, len(text) // 4)

    def json(self, messages, schema, **kw):
        f = schema.model_fields
        reply = ({"evidence": [], "choice": get_args(f["choice"].annotation)[0]} if "choice" in f
                 else {"evidence": [], "answer": "nothing is known"})
        return schema.model_validate(reply), Usage(1, 1, 0.0)


def daemon(allow=()) -> tuple[Daemon, FakeLink]:
    s = load_settings(None, daemon={"allow_agents": list(allow), "rate_per_agent": 5, "rate_burst": 3})
    link = FakeLink()
    reports = build.reports(s, link)
    ingestor = Ingestor(STORE, queue_size=50, max_bytes=4096, grace_ms=0, silence_s=5, report=reports.report)
    desk = QuestionDesk(None, CLOCK, link.topics, link.publish, queue_size=5, asker="A1_JAKE", budget=5,
                        report=reports.report)
    d = Daemon(s, db=":memory:", clock=CLOCK, link=link, reports=reports, gate=build.gate(s), ingestor=ingestor,
               desk=desk)
    return d, link


# -- what a sender controls ---------------------------------------------------------------
nasty = st.sampled_from(["/", "+", "#", "..", ".", "\x00", "\n", "\x7f", " ", "é", "中", "$", "-", "_"])
agent_ids = st.one_of(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,70}", fullmatch=True),
                      st.lists(st.one_of(nasty, st.text(max_size=4)), max_size=6).map("".join))
kinds = st.sampled_from(["caption", "audio", "frame", "status", "query", "other", ""])
topics = st.one_of(st.builds(lambda a, k: f"{R}/agents/{a}/{k}", agent_ids, kinds),
                   st.just(f"{R}/query"), st.text(max_size=40).map(lambda t: f"{R}/{t}"))
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=3), max_leaves=8)
times = st.one_of(st.integers(), st.integers(EPOCH_2000_MS, 2_000_000_000_000), st.floats(), st.text(max_size=12),
                  st.integers(2**63 - 2, 2**70), st.integers(-(2**70), -(2**63)))


def _nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


# what Python's json module cannot write: nesting in the thousands, NaN and Infinity, lone surrogates
deep = st.integers(100, 5000).map(lambda n: _nested(n))
raw_json = st.one_of(
    deep.map(str.encode),
    st.builds(lambda n, k: ('{"id":"deep","ts":1735700000000,"' + k + '":' + _nested(n, '"x"') + "}").encode(),
              st.integers(100, 3000), st.sampled_from(["text", "speaker", "id", "extra", "question", "options"])),
    st.sampled_from([b'{"id":"n","ts":NaN,"text":"x"}', b'{"id":"n","ts":Infinity,"text":"x"}',
                     b'{"id":"n","ts":-Infinity,"text":"x"}', b'{"id":"s","ts":1735700000000,"text":"\\ud800x"}',
                     b'{"id":"s","ts":1735700000000,"text":"a\\udfffb","speaker":"\\ud83d"}',
                     b'{"id":"q","question":"\\ud800?","reply_to":"r/\\uffff"}',
                     b'{"id":"big","ts":1735700000000,"end_ts":1' + b"0" * 400 + b',"text":"x"}',
                     b'{"id":"big","ts":-1' + b"0" * 400 + b',"text":"x"}']),
)
caption_like = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=210), st.integers()), "ts": times},
    optional={"end_ts": times, "text": st.one_of(st.text(max_size=60), json_values),
              "kind": st.sampled_from(["caption", "transcript", "x", 1]), "speaker": json_values,
              "lang": json_values, "extra": json_values},
).map(lambda d: json.dumps(d).encode())
query_like = st.fixed_dictionaries(
    {"id": st.one_of(st.from_regex(r"[A-Za-z0-9_.:-]{1,20}", fullmatch=True), st.text(max_size=10)),
     "question": st.text(max_size=80)},
    optional={"options": st.lists(st.text(max_size=10), max_size=5), "as_of": times, "asker": json_values,
              "reply_to": st.one_of(st.text(max_size=30), st.sampled_from(
                  [f"{R}/agents/r1/caption", f"{R}/answer/x", "a/+/b", "$SYS/x", f"{R}/events", "ok/reply"])),
              "stream": st.booleans(), "agents": json_values},
).map(lambda d: json.dumps(d).encode())
payloads = st.one_of(st.binary(max_size=300), caption_like, query_like, json_values.map(lambda v: json.dumps(v).encode()),
                     st.binary(min_size=4097, max_size=5000), raw_json)
user_properties = st.dictionaries(
    st.sampled_from(["ts", "seq", "id", "rate", "x"]),
    st.one_of(st.from_regex(r"[0-9]{1,40}", fullmatch=True), st.text(max_size=20), st.just("9" * 19),
              st.just(str(2**63)), st.just("-1")), max_size=4)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topic=topics, payload=payloads, allow=st.sampled_from([(), ("robot1",)]), user=user_properties)
def test_any_agent_message_is_stored_queued_or_refused_with_a_code(topic, payload, allow, user):
    d, link = daemon(allow)
    errors: list[dict] = []
    link.publish = lambda t, p, **kw: errors.append(json.loads(p)) or True
    taken = d.route(Inbound(topic=topic, payload=payload, qos=1, user=user))
    queued = list(d.ingestor.queue._queue)
    if taken:  # a caption: parsed later, acknowledged once stored or refused
        (item,) = queued
        c = d.ingestor.parse(item.agent, item.payload, item.topic)
        if c is not None:
            d.ingestor._store([c])
            assert EPOCH_2000_MS <= c.msg.ts and not any(ch in c.msg.text for ch in "\n\r\x00\x1b")
            assert not any(ch in (c.msg.speaker or "") for ch in "\n\r\x00\x1b\u2028")
            assert not allow or item.agent in allow
            assert c.msg.id == json.loads(item.payload)["id"]  # stored under the sender's own id
        item.ack()
        assert link.acked and link.acked[0].topic == topic
    else:
        assert not queued
    assert all(e["code"] in KNOWN for e in errors), errors
    kind = topic.removeprefix(f"{R}/").split("/")
    stored_or_waiting = taken and not errors or d.desk.queue.qsize() or kind[-1] == "status"
    assert stored_or_waiting or errors  # nothing vanishes without a word


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=st.one_of(query_like, payloads), v5_reply=st.sampled_from([None, "resp/x", f"{R}/events"]))
def test_any_question_gets_one_final_reply_never_on_chorus_topics(payload, v5_reply):
    link = FakeLink()
    reports = []
    answerer = Answerer(STORE, CLOCK, AnswerSettings(planner="rule"), EchoLLM(), budget=5)
    desk = QuestionDesk(answerer, CLOCK, link.topics, link.publish, queue_size=5, asker="A1_JAKE", budget=5,
                        report=lambda code, msg, **w: reports.append(code))
    asyncio.run(desk.handle(Inbound(topic=f"{R}/query", payload=payload, qos=1, response_topic=v5_reply)))
    finals = [(t, json.loads(p)) for t, p in link.sent if json.loads(p).get("status") in ("ok", "error")]
    assert len(finals) == 1
    topic, body = finals[0]
    assert body["status"] == "ok" or body["code"] in KNOWN, body
    assert body["status"] == "error" or not reports
    assert topic.startswith(f"{R}/answer/") or not topic.startswith(R)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=st.one_of(payloads, st.binary(max_size=64).map(lambda b: b'{"ts":1735700000000,"seq":1}\n' + b)),
       user=user_properties, kind=st.sampled_from(["audio", "frame"]))
def test_any_audio_chunk_or_frame_is_queued_or_refused_with_a_code(tmp_path_factory, payload, user, kind):
    """Audio and frames carry their metadata in MQTT 5 user properties or a JSON header: huge
    numbers, deep nesting and garbage there cost one coded error, never the worker."""
    from daemon.audio_worker import AudioWorker
    from daemon.frame_worker import FrameWorker
    from memory.frames import FrameSettings, FrameStore
    from models.config import SpeechSettings, VisionSettings

    reports: list[str] = []
    report = lambda code, msg, **w: reports.append(code)  # noqa: E731
    if kind == "audio":
        worker = AudioWorker(STORE, SpeechSettings(), report=report, advance=lambda a, ms: None)
    else:
        worker = FrameWorker(FrameStore(STORE, tmp_path_factory.getbasetemp() / "frames"), FrameSettings(),
                        VisionSettings(), report=report)
    worker.offer("robot1", Inbound(topic=f"{R}/agents/robot1/{kind}", payload=payload, qos=0, user=user))
    queued = list(worker.queue._queue)
    assert all(c in KNOWN for c in reports), reports
    assert bool(queued) != bool(reports)  # queued, or refused with a word: never both, never neither
    for _agent, h, _data, _topic, key in queued:
        assert 0 <= h.ts <= 2**63 - 1 and 0 <= h.seq <= 2**63 - 1 and key
