"""Load benchmark (not a test): N agents × (captions, audio, frames) at ten times realistic rates
through mosquitto on loopback into a real daemon, for a bounded time. Reports the rates sent and
stored, queue depths (from `stats`), the daemon's memory, question latency idle and under load,
and whether every caption arrived once.

    .venv/bin/python tests/bench_load.py [--agents 6] [--seconds 60] [--factor 10] [--questions 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiomqtt  # noqa: E402

from streams.load import run_load  # noqa: E402
from streams.topics import Topics  # noqa: E402
from tests.bench_live import QUESTIONS, ask  # noqa: E402
from tests.mqtt_util import Mosquitto, daemon_env, query, start_daemon, wait_ready, wait_until  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def slice_db(path: Path) -> None:
    """DAY1 11:00-13:00 of three agents: a memory to ask about."""
    from daemon.recordings import import_egolife
    from memory.clock import HouseClock
    from memory.store import Store

    egolife = Path(os.environ.get("CHORUS_EGOLIFE", Path(__file__).resolve().parents[2] / "shared/data/egolife"))
    s = Store(path)
    import_egolife(s, egolife / "EgoLifeCap", HouseClock.of("2025-01-01", "Asia/Shanghai"), days={1},
                   agents={"A1_JAKE", "A2_ALICE", "A4_LUCIA"}, progress=lambda fs: [f for f in fs if f.hour in (11, 12)])
    s.close()


class Stats(threading.Thread):
    """Reads the daemon's `stats` and `errors` while the load runs."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port, self.stats, self.errors, self.stop = port, [], {}, threading.Event()

    def run(self) -> None:
        async def main():
            async with aiomqtt.Client("127.0.0.1", self.port) as c:
                await c.subscribe("chorus/v1/stats")
                await c.subscribe("chorus/v1/errors")
                async for m in c.messages:
                    body = json.loads(bytes(m.payload))
                    if str(m.topic).endswith("stats"):
                        self.stats.append(body)
                    else:
                        self.errors[body["code"]] = self.errors.get(body["code"], 0) + 1
                    if self.stop.is_set():
                        return

        try:
            asyncio.run(main())
        except aiomqtt.MqttError:  # the broker stopped at the end of the run
            pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--factor", type=float, default=10)
    ap.add_argument("--questions", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="chorus-load-"))
    db = tmp / "load.sqlite"
    slice_db(db)
    broker = Mosquitto(tmp)
    env = daemon_env(broker.port, CHORUS__DAEMON__CONSOLIDATE_EVERY_S="3600", CHORUS__DAEMON__SILENCE_S="3600")
    proc = start_daemon(db, env, tmp / "daemon.log")
    try:
        wait_ready(tmp / "daemon.log")
        idle = [asyncio.run(ask(broker.port, f"idle{i}", *QUESTIONS[i % len(QUESTIONS)])) for i in range(args.questions)]
        before = query(db, "SELECT COUNT(*) FROM observations")[0][0]
        stats = Stats(broker.port)
        stats.start()
        rss = [rss_mb(proc.pid)]
        result: dict = {}
        t0 = time.perf_counter()

        def load() -> None:
            result["rep"] = asyncio.run(run_load("127.0.0.1", broker.port, Topics(), agents=args.agents,
                                                 seconds=args.seconds, factor=args.factor))

        loader = threading.Thread(target=load)
        loader.start()
        loaded, i = [], 0
        while loader.is_alive():
            if i < args.questions:
                loaded.append(asyncio.run(ask(broker.port, f"load{i}", *QUESTIONS[i % len(QUESTIONS)])))
                i += 1
            rss.append(rss_mb(proc.pid))
            time.sleep(1)
        rep = result["rep"]
        n = rep.sent["caption"]
        wait_until(lambda: query(db, "SELECT COUNT(*) FROM observations")[0][0] >= before + n, 300)
        drained_s = time.perf_counter() - t0
        rss.append(rss_mb(proc.pid))
        stored = query(db, "SELECT COUNT(*), COUNT(DISTINCT ext_id) FROM observations WHERE ext_id LIKE 'load%'")[0]
        stats.stop.set()
        alive = proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        broker.stop()
    queues = [s["queues"] for s in stats.stats]
    print(json.dumps({
        "agents": args.agents, "seconds": round(rep.seconds, 1), "factor": args.factor,
        "sent_per_s": {k: round(v / rep.seconds, 1) for k, v in rep.sent.items()},
        "mb_per_s": round(sum(rep.bytes.values()) / rep.seconds / 1e6, 2),
        "publisher_behind_s": round(rep.late_s, 3),
        "captions": {"sent": n, "stored": stored[0], "distinct": stored[1], "lost": n - stored[1],
                     "stored_per_s": round(stored[1] / drained_s, 1), "all_stored_after_s": round(drained_s, 1)},
        "queue_max": {k: max((q[k] for q in queues), default=None) for k in ("captions", "questions", "outbox")},
        "rss_mb": {"start": round(rss[0], 1), "max": round(max(rss), 1), "end": round(rss[-1], 1)},
        "question_ms_p50": {"idle": round(statistics.median(idle)), "under_load": round(statistics.median(loaded))
                            if loaded else None},
        "question_ms": {"idle": [round(x) for x in idle], "under_load": [round(x) for x in loaded]},
        "errors_seen": stats.errors, "daemon_alive": alive,
        "daemon_counts": stats.stats[-1]["captions"] if stats.stats else None,
        "speech": stats.stats[-1].get("speech") if stats.stats else None,
        "frames": stats.stats[-1].get("frames") if stats.stats else None,
    }, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
