"""First start: `chorus status` in readable lines (and `--json`), and the daemon's ready lines that
say how to ask and how much catch-up work is queued; a question during the catch-up is answered."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import time

import aiomqtt
import pytest

from daemon.readiness import Backlog, backlog, duration, ready_lines, status_text
from memory.records import Observation
from tests.mqtt_util import ROOT, Mosquitto, daemon_env, start_daemon, wait_ready


def status(db, *extra) -> subprocess.CompletedProcess:
    env = daemon_env(1)  # a port nobody listens on: no broker reachable
    return subprocess.run([sys.executable, "-m", "daemon.cli", "status", "--db", str(db), *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_status_prints_lines_not_a_dict_and_json_on_request(store):
    store.add([Observation("A1_JAKE", "caption", 1000 * i, 1000 * i + 900, f"line {i}") for i in range(0, 120, 2)])
    store.close()
    r = status(store.path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert not any(ch in r.stdout for ch in "{}'")  # no Python dict
    assert lines[0].split() == ["memory", str(store.path)]
    assert "60 observations, 4 segments" in r.stdout and "agents      A1_JAKE" in r.stdout
    assert "8 units to embed" in r.stdout and "windows to consolidate" in r.stdout  # 4 for MiniLM, 4 for USE
    assert lines[-1].startswith("daemon      no broker reachable")
    data = json.loads(status(store.path, "--json").stdout)
    assert data["counts"]["segments"] == 4 and data["backlog"]["units"] == 8 and data["daemon"] is None


def test_the_backlog_counts_units_without_vectors_and_pending_windows(store):
    from memory.vectors import VectorIndex
    from tests.test_vectors import CountingEmbed

    store.add([Observation("A", "caption", 1000 * i, 1000 * i + 900, f"line {i}") for i in range(0, 700, 10)])
    b = backlog(store)
    assert b.units == 24 and b.windows == 2 and b.embed_s > 0 and b.consolidate_s > 0
    both = backlog(store, second="use-multilingual")  # the default second encoder's vectors: units only
    assert both.units == 48 and both.embed_s > b.embed_s
    assert backlog(store, "use-multilingual", second="use-multilingual").units == 24  # the same model once
    VectorIndex(store, CountingEmbed(), model="letters", dim=26).refresh()
    assert backlog(store).units == 0
    assert backlog(store, dense=False).units == 0


def test_ready_lines_say_how_to_ask_and_what_is_queued():
    first, second = ready_lines("tiny", "var/chorus.sqlite", Backlog(31_823, 379, 530.4, 3790.0))
    assert " ready: " in f" {first}" and "`chorus chat`" in first
    assert second == ("catch-up queued: 31,823 units to embed (about 9 min); 379 windows to consolidate "
                      "(about 1 h 03 min, giving way to questions); questions are answered meanwhile from "
                      "lexical search and the vectors embedded so far")
    assert ready_lines("tiny", "x", Backlog(0, 0, 0, 0))[1].startswith("no catch-up work queued")
    assert [duration(s) for s in (12, 600, 3600 + 300)] == ["12 s", "10 min", "1 h 05 min"]
    text = status_text({"db": "m.sqlite", "counts": {}, "agents": [], "first": None, "last": None,
                        "daemon": {"status": "online", "info": {"pid": 7, "model": "tiny"}}, "broker": "h:1"})
    assert text.splitlines()[-1] == "daemon      online at h:1, pid 7, model tiny"


def test_a_question_during_catch_up_does_not_wait_for_the_backlog(slice_db, clock, tmp_path):
    """More new units than a question may embed inline: it is answered from BM25 and the vectors
    there are, and the backlog is left whole to the background indexer."""
    from assistant.config import SearchSettings
    from assistant.query import Query
    from assistant.retrievers import Retrievers
    from memory.store import Store

    db = tmp_path / "catch-up.sqlite"
    shutil.copy(slice_db, db)
    pool = Retrievers(Store(db), clock, SearchSettings())
    seg, _ = pool.vectors()
    seg.reset()  # the session's slice may have been embedded by an earlier test: none are, here
    waiting = seg.pending()
    assert waiting > 256
    got = pool.make("default").retrieve(Query("Who used the screwdriver first?", clock.parse("DAY1 12:30"),
                                              ("Tasha", "Alice", "Shure", "Lucia"), asker="A1_JAKE"))
    assert got.units and seg.pending() == waiting
    assert backlog(pool.store).units >= waiting


@pytest.mark.slow
def test_first_start_logs_ready_with_the_backlog_and_answers_during_catch_up(slice_db, tmp_path):
    """An imported memory with no vectors: the daemon says it is ready, how to ask and what it will
    catch up on, and answers a question during the catch-up (how long it took is printed: a figure
    for the README, not an assertion)."""
    from memory.store import Store

    db = tmp_path / "first.sqlite"
    shutil.copy(slice_db, db)
    s = Store(db)
    s.db.execute("DELETE FROM vector_indices")  # the session's slice may have been embedded by an earlier test
    s.close()
    broker = Mosquitto(tmp_path)
    log = tmp_path / "daemon.log"
    proc = start_daemon(db, daemon_env(broker.port), log)
    try:
        wait_ready(log, 180)
        ready_at = time.time()
        text = log.read_text()
        assert "ask with `chorus chat`" in text
        assert "catch-up queued: " in text and " units to embed (about " in text
        answer = asyncio.run(_ask(broker.port, {
            "id": "q-1", "question": "Who used the screwdriver first?", "options": ["Tasha", "Alice", "Shure", "Lucia"],
            "as_of": "DAY1 12:30:00", "reply_to": "test/answers/q-1"}, "test/answers/q-1"))
        assert answer["status"] == "ok" and answer["evidence"]
        print(f"first answer {time.time() - ready_at:.1f} s after the ready line")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        broker.stop()


async def _ask(port: int, body: dict, reply: str) -> dict:
    async with aiomqtt.Client("127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V311) as c:
        await c.subscribe(reply, qos=1)
        await c.publish("chorus/v1/query", json.dumps(body), qos=1)

        async def loop():
            async for m in c.messages:
                d = json.loads(bytes(m.payload))
                if d.get("status") in ("ok", "error"):
                    return d

        return await asyncio.wait_for(loop(), 300)
