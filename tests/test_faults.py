"""Faults against a real mosquitto (persistence on) and a real daemon process: kill -9 while it
ingests and while it consolidates, a broker restart, a long downtime. Afterwards every QoS 1
caption sent is stored exactly once, every closed window is consolidated once, and the file
passes `PRAGMA integrity_check`. Each test prints its row of the fault table (docs/figures.md) (and appends
it to $CHORUS_FAULT_TABLE when set).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest

from streams.load import Resilient
from tests.mqtt_util import Mosquitto, daemon_env, query, start_daemon, tally, wait_ready, wait_until

pytestmark = pytest.mark.slow
W0 = 1_735_700_400_000  # a window start (multiple of 10 minutes)
R = "chorus/v1"


def fault_env(port: int, **extra) -> dict:
    # windows close on the watermark only (no wall-clock closing), so the closed set is known
    return daemon_env(port, CHORUS__DAEMON__CONSOLIDATE_EVERY_S="3600", CHORUS__DAEMON__SILENCE_S="3600",
                      CHORUS__MQTT__CLIENT_ID="chorus-faults", CHORUS__CONSOLIDATION__INPUT_TOKENS="300",
                      CHORUS__CONSOLIDATION__OUTPUT_TOKENS="120", CHORUS__CONSOLIDATION__MAX_EVENTS="2", **extra)


def captions(n: int, step_ms: int, offset_ms: int = 300_000):
    for i in range(n):
        ts = W0 + offset_ms + i * step_ms
        body = {"id": f"f{i}", "ts": ts, "end_ts": ts + step_ms // 2,
                "text": f"robot{i % 3} carries box {i} to shelf {i % 17} near the door"}
        yield f"{R}/agents/robot{i % 3}/caption", json.dumps(body).encode()


async def publish_all(port: int, items, on_sent=None) -> Resilient:
    pub = Resilient("127.0.0.1", port, client_id="fault-publisher")
    for i, (topic, payload) in enumerate(items):
        await pub.publish(topic, payload, qos=1)
        if on_sent:
            await on_sent(i + 1)
    await pub.close()
    return pub


def closed_once(db, until_ms: int) -> tuple[int, int]:
    rows = query(db, """SELECT w.start_ms, w.consolidated_rev IS NOT NULL AND w.rev <= w.consolidated_rev,
                               COUNT(DISTINCT e.created_ms), COUNT(DISTINCT e.input_hash)
                        FROM windows w LEFT JOIN events e ON e.window_start_ms = w.start_ms
                        WHERE w.end_ms <= ? GROUP BY w.start_ms""", (until_ms,))
    return len(rows), sum(1 for _, done, gens, hashes in rows if done and gens == 1 and hashes == 1)


def record(row: dict) -> None:
    print("\nFAULT", json.dumps(row))
    if os.environ.get("CHORUS_FAULT_TABLE"):
        with open(os.environ["CHORUS_FAULT_TABLE"], "a") as f:
            f.write(json.dumps(row) + "\n")


class Rig:
    """A broker and a daemon in a folder; restartable."""

    def __init__(self, tmp_path, **env):
        self.tmp = tmp_path
        self.broker = Mosquitto(tmp_path)
        self.db = tmp_path / "faults.sqlite"
        self.env = fault_env(self.broker.port, **env)
        self.runs = 0
        self.proc = None
        self.start()

    def start(self, wait: bool = True) -> None:
        self.runs += 1
        log = self.tmp / f"daemon{self.runs}.log"
        self.proc = start_daemon(self.db, self.env, log)
        if wait:
            wait_ready(log)

    def kill(self, sig=signal.SIGKILL) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(30)

    def restart_broker(self) -> None:
        self.broker.stop()  # SIGTERM: mosquitto writes its persistence file
        time.sleep(1)
        self.broker = Mosquitto(self.tmp, port=self.broker.port)

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.kill(signal.SIGTERM)
        self.broker.stop()

    def count(self) -> int:
        return query(self.db, "SELECT COUNT(*) FROM observations")[0][0] if self.db.exists() else 0


N = 2000


@pytest.mark.parametrize("fault", ["kill -9 while ingesting", "broker restart while ingesting",
                                   "daemon down 15 s while agents send"])
def test_every_caption_stored_once_through_a_fault(tmp_path, fault):
    """2,000 QoS 1 captions from 3 agents over two windows (the first closes on the watermark and
    is consolidated by the tiny model); the fault strikes after the first 1,000 are sent."""
    rig = Rig(tmp_path)
    items = list(captions(N, step_ms=300))
    sent_ids = {f"f{i}" for i in range(N)}

    async def strike() -> None:
        if fault.startswith("kill"):
            await asyncio.to_thread(wait_until, lambda: rig.count() >= 300, 60)
            rig.kill()  # while captions keep arriving: some sit received but not yet committed
            await asyncio.sleep(1)
            rig.start(wait=False)  # comes back while the agents keep sending
        elif fault.startswith("broker"):
            await asyncio.to_thread(rig.restart_broker)
        else:
            rig.kill(signal.SIGTERM)
            await asyncio.sleep(15)
            rig.start(wait=False)

    tasks = []

    async def on_sent(n: int) -> None:
        if n == 1000:  # the agents do not wait for the fault
            tasks.append(asyncio.get_running_loop().create_task(strike()))
        if n == N:
            await asyncio.gather(*tasks)

    try:
        pub = asyncio.run(publish_all(rig.broker.port, items, on_sent))
        wait_until(lambda: rig.count() >= N, 180)
        first_window = closed_once(rig.db, W0 + 600_000)
        wait_until(lambda: closed_once(rig.db, W0 + 600_000)[1] == 1, 240)
        first_window = closed_once(rig.db, W0 + 600_000)
        assert rig.proc.poll() is None
    finally:
        rig.close()
    t = tally(rig.db, sent_ids)
    record({"fault": fault, **t, "publisher_resent": pub.resent, "windows_closed": first_window[0],
            "windows_once": first_window[1]})
    assert (t["stored"], t["duplicated"], t["lost"], t["integrity"]) == (N, 0, 0, "ok")
    assert first_window == (1, 1)


def test_kill_9_while_consolidating_then_every_window_once(tmp_path):
    """Captions over four windows; kill -9 once the first window's events are written (the tiny
    model is then at work on the next); after the restart every closed window has one generation."""
    rig = Rig(tmp_path)
    n = 1000
    items = list(captions(n, step_ms=2000, offset_ms=0))  # 33 minutes: windows 0-2 close on the watermark
    until = W0 + 3 * 600_000
    try:
        asyncio.run(publish_all(rig.broker.port, items))
        assert wait_until(lambda: rig.count() >= n, 120)
        done = wait_until(lambda: closed_once(rig.db, until)[1] >= 1 and closed_once(rig.db, until), 400)
        rig.kill()
        assert done and done[1] < 3, done  # killed with work left
        killed_at = done[1]
        rig.start()
        final = wait_until(lambda: (c := closed_once(rig.db, until))[1] == 3 and c, 600)
    finally:
        rig.close()
    t = tally(rig.db, {f"f{i}" for i in range(n)})
    record({"fault": "kill -9 while consolidating", **t, "windows_closed": 3, "windows_once": final and final[1],
            "windows_done_at_kill": killed_at})
    assert final == (3, 3)
    assert (t["stored"], t["duplicated"], t["lost"], t["integrity"]) == (n, 0, 0, "ok")
