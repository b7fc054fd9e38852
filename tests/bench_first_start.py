"""First start, as `./dev run` gives it: the week imported, no vectors, no events, then `chorus run`.

    .venv/bin/python tests/bench_first_start.py --db /tmp/week.sqlite [--questions 3]

The memory (`--db`, the week as `chorus import egolife` left it, not consolidated; embedded or
not: the copy's vectors are dropped) is copied to a temporary folder; a mosquitto broker is started
there and the daemon with its own defaults (the bundled models, the rule planner; only the
broker's port and the log level are set). From the daemon's ready line,
the README's questions are asked over MQTT one after another, as a person would at once: the
seconds from the ready line to each answer, the answer and its stage timings, and the catch-up
the daemon announced, and its peak resident memory. Not a test: run by hand; prints one line per
question and the ready lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.mqtt_util import Mosquitto, daemon_env, start_daemon, wait_ready  # noqa: E402
from tests.test_readiness import _ask  # noqa: E402

QUESTIONS = [
    {"question": "Who used the screwdriver first?", "options": ["Tasha", "Alice", "Shure", "Lucia"],
     "as_of": "DAY1 11:21:02", "asker": "A1_JAKE"},
    {"question": "What were we talking about at lunch on DAY1?", "as_of": "DAY1 13:00:00", "asker": "A1_JAKE"},
    {"question": "Who bought the flowers?", "as_of": "DAY2 18:00:00", "asker": "A1_JAKE"},
]


def fresh_copy(db: Path, into: Path) -> Path:
    import sqlean

    out = into / "first.sqlite"
    src = sqlean.connect(f"file:{db}?mode=ro", uri=True)
    dst = sqlean.connect(str(out))
    src.backup(dst)
    src.close()
    dst.execute("DELETE FROM vector_indices")  # every vector is made again, as after an import
    dst.commit()
    dst.close()
    index = db.parent / (db.name + ".index")
    if index.is_dir():
        shutil.copytree(index, into / (out.name + ".index"))
    return out


def follow(db: Path, seconds: float, since: float) -> None:
    """Units still to embed and windows still to consolidate, every 15 s, read-only."""
    from daemon.readiness import backlog
    from memory.store import Store

    end = time.time() + seconds
    while time.time() < end:
        store = Store(db, readonly=True)
        try:
            b = backlog(store)
        finally:
            store.close()
        print(f"  {time.time() - since:6.0f} s after ready: {b.units:,} units to embed, {b.windows} windows", flush=True)
        if b.empty:
            return
        time.sleep(15)


def peak_rss_mb(pid: int) -> int | None:
    """The process's peak resident set (VmHWM) while it still runs, or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--questions", type=int, default=len(QUESTIONS))
    ap.add_argument("--watch", type=float, default=0, help="then follow the catch-up this many seconds")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = fresh_copy(args.db, folder)
        broker = Mosquitto(folder)
        env = {k: v for k, v in daemon_env(broker.port).items()
               if k.startswith(("CHORUS__MQTT__", "CHORUS_LOG")) or not k.startswith("CHORUS")}
        log = folder / "daemon.log"
        t0 = time.time()
        proc = start_daemon(db, env, log)
        try:
            wait_ready(log, 600)
            ready = time.time()
            print(f"ready {ready - t0:.1f} s after start")
            for line in log.read_text(errors="replace").splitlines():
                if " ready: " in line or "catch-up queued" in line:
                    print("  " + line[-220:])
            for i, q in enumerate(QUESTIONS[: args.questions]):
                body = q | {"id": f"first-{i}", "reply_to": f"bench/answers/first-{i}"}
                a = asyncio.run(_ask(broker.port, body, body["reply_to"]))
                print(json.dumps({"question": q["question"], "seconds_after_ready": round(time.time() - ready, 1)}
                                 | {k: v for k, v in a.items() if k != "evidence"}
                                 | {"evidence": [e.get("text", "")[:80] for e in a.get("evidence") or []][:3]},
                                 ensure_ascii=False), flush=True)
            follow(db, args.watch, ready)
        finally:
            print(f"daemon peak resident memory: {peak_rss_mb(proc.pid)} MB", flush=True)
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
            broker.stop()
            lines = log.read_text(errors="replace").splitlines()
            tail = [ln for ln in lines if any(w in ln for w in ("embedded", "consolidat", "WARNING", "ERROR", "index"))]
            print("\n".join("  " + ln[-300:] for ln in tail[-12:]))


if __name__ == "__main__":
    main()
