"""Ordinary faults inside the workers: the worker lives, the fault is reported on `errors`, and
work goes on once the fault ends. A locked database and a broken frames folder against a real
mosquitto and a real daemon; a recognizer and a VAD that raise, in process, with a real store.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import numpy as np
import pytest
import sqlean

from daemon.audio_stream import Utterance
from daemon.audio_worker import AudioWorker
from memory.store import Store
from models.config import SpeechSettings
from tests.mqtt_util import Mosquitto, daemon_env, query, start_daemon, wait_ready, wait_until
from tests.test_poison import JPEG, cap, send

R = "chorus/v1"
TS = int(time.time() * 1000) - 600_000


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    broker = Mosquitto(tmp)
    env = daemon_env(broker.port, CHORUS__DAEMON__CONSOLIDATE_EVERY_S="3600", CHORUS__DAEMON__SILENCE_S="3600",
                     CHORUS__FRAMES__DIR=str(tmp / "frames"), CHORUS__FRAMES__EVERY_MS="0",
                     CHORUS__MQTT__CLIENT_ID="chorus-workers")
    db = tmp / "faults.sqlite"
    proc = start_daemon(db, env, tmp / "daemon.log")
    wait_ready(tmp / "daemon.log")
    yield broker, proc, db, tmp
    proc.terminate()
    assert proc.wait(30) == 0
    broker.stop()


@pytest.mark.slow
def test_a_locked_database_holds_captions_until_it_is_free_and_loses_none(live):
    broker, proc, db, _ = live
    blocker = sqlean.connect(str(db), isolation_level=None)
    blocker.execute("PRAGMA busy_timeout = 10000")
    blocker.execute("BEGIN EXCLUSIVE")  # another writer holds the file longer than busy_timeout (10 s)
    try:
        ids = [f"locked{i}" for i in range(5)]
        got = asyncio.run(send(broker.port, [(f"{R}/agents/robot1/caption", cap(id=i, ts=TS + n), None)
                                             for n, i in enumerate(ids)], [f"{R}/errors"], wait_s=25,
                               until=lambda got: any(b["code"] == "store_failed" for _, b in got)))
        assert any(b["code"] == "store_failed" and "locked" in b["message"] for _, b in got)
        assert proc.poll() is None
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert wait_until(lambda: query(db, "SELECT COUNT(*) FROM observations WHERE ext_id LIKE 'locked%'")[0][0] == 5, 60)
    assert proc.poll() is None


@pytest.mark.slow
def test_a_broken_frames_folder_is_reported_and_frames_are_stored_again_once_it_is_mended(live):
    broker, proc, db, tmp = live
    (tmp / "frames").mkdir(exist_ok=True)
    (tmp / "frames" / "cam1").write_text("a file where the agent's folder should be")
    got = asyncio.run(send(broker.port, [(f"{R}/agents/cam1/frame", JPEG, {"ts": str(TS), "seq": "1"})],
                           [f"{R}/errors"], wait_s=20, until=lambda got: any(b["code"] == "frames_failed" for _, b in got)))
    assert any(b["code"] == "frames_failed" for _, b in got)
    assert proc.poll() is None
    (tmp / "frames" / "cam1").unlink()  # the fault ends
    asyncio.run(send(broker.port, [(f"{R}/agents/cam1/frame", JPEG, {"ts": str(TS + 2000), "seq": "2"})], []))
    assert wait_until(lambda: query(db, "SELECT COUNT(*) FROM frames f JOIN agents a ON a.id = f.agent_id "
                                        "WHERE a.name = 'cam1'")[0][0] == 1, 30)
    assert list((tmp / "frames" / "cam1").rglob("*.jpg"))
    assert proc.poll() is None


class FlakyRecognizer:
    """Raises on its first call (a CTranslate2 error, say), then hears one line."""

    def __init__(self):
        self.calls = 0

    def transcribe(self, audio):
        from models.speech import Heard, Line

        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("CUDA failed with error out of memory")
        return Heard([Line(0.0, 1.0, "put the box on the shelf", 0.01, -0.2)], "en", len(audio) / 16000, 0.1)


async def _recognise_two(hearing: AudioWorker) -> asyncio.Task:
    worker = asyncio.create_task(hearing.transcribe())
    for start in (TS, TS + 5000):
        hearing._enqueue(Utterance("robot1", start, start + 1000, np.zeros(16000, dtype=np.float32)))
    for _ in range(100):
        if hearing.counts["transcripts"] or worker.done():
            break
        await asyncio.sleep(0.05)
    return worker


def test_a_recognizer_that_raises_costs_one_utterance_not_the_worker(tmp_path):
    store = Store(tmp_path / "m.sqlite")
    reports, marks = [], []
    hearing = AudioWorker(store, SpeechSettings(), report=lambda code, msg, **w: reports.append(code),
                          advance=lambda agent, ms: marks.append(ms), model=FlakyRecognizer())

    async def run():
        worker = await _recognise_two(hearing)
        alive = not worker.done()
        worker.cancel()
        return alive

    assert asyncio.run(run())
    assert reports == ["speech_failed"] and hearing.counts["failed"] == 1
    assert hearing.counts["transcripts"] == 1
    assert [r[0] for r in store.db.execute("SELECT text FROM observations")] == ["put the box on the shelf"]
    assert not hearing.pending["robot1"]  # the failed utterance does not hold the watermark back


def test_a_full_disk_keeps_the_utterance_until_there_is_room(tmp_path, monkeypatch):
    from memory.errors import StorageFull

    store = Store(tmp_path / "m.sqlite")
    reports = []
    recognizer = FlakyRecognizer()
    recognizer.calls = 1  # no model error: the disk is the fault
    hearing = AudioWorker(store, SpeechSettings(), report=lambda code, msg, **w: reports.append(code),
                          advance=lambda agent, ms: None, model=recognizer)
    real_add, full = store.add, threading.Event()
    full.set()

    def add(obs):
        if full.is_set():
            raise StorageFull("no space left on device")
        return real_add(obs)

    monkeypatch.setattr(store, "add", add)
    monkeypatch.setattr(asyncio, "sleep", _fast_sleep(asyncio.sleep))

    async def run():
        worker = asyncio.create_task(hearing.transcribe())
        hearing._enqueue(Utterance("robot1", TS, TS + 1000, np.zeros(16000, dtype=np.float32)))
        for _ in range(40):
            await asyncio.sleep(0.01)
        assert "disk_full" in reports and not worker.done() and hearing.pending["robot1"]
        full.clear()  # space is back
        for _ in range(200):
            if hearing.counts["transcripts"]:
                break
            await asyncio.sleep(0.01)
        worker.cancel()

    asyncio.run(run())
    assert hearing.counts["transcripts"] == 1 and not hearing.pending["robot1"]


def _fast_sleep(real):
    async def sleep(s, *a, **kw):
        return await real(min(s, 0.01), *a, **kw)
    return sleep


def test_errors_are_throttled_per_code_whatever_the_agent():
    """Inventing agent ids does not flood `errors`: the throttle counts per code too."""
    from daemon.admission import ReportThrottle

    t = ReportThrottle(rate=2, burst=20, code_rate=10, code_burst=50, clock=lambda: 0.0)
    sent = [t.admit("bad_schema", f"bogus{i}") for i in range(1000)]
    assert sum(x is not None for x in sent) == 50
    assert t.admit("bad_time", "bogus1") == 0  # another code still gets through
    assert json.dumps(t.held) == json.dumps({"bad_schema": 950})
