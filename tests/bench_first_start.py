"""First start, as `./dev run` gives it: the week imported, no vectors, no events, then `chorus run`.

    .venv/bin/python tests/bench_first_start.py --db /tmp/week.sqlite [--questions 3]

The memory (`--db`, the week as `chorus import egolife` left it, not consolidated; embedded or
not: the copy's vectors are dropped) is copied to a temporary folder; a mosquitto broker is started
there and the daemon with its own defaults (the bundled base model, the rule planner; only the
broker's port, the house's time zone and the log level are set). From the daemon's ready line,
the README's questions are asked over MQTT one after another, as a person would at once: the
seconds from the ready line to each answer, the answer and its stage timings, and the catch-up
the daemon announced. Not a test: run by hand; prints one line per question and the ready lines.
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--questions", type=int, default=len(QUESTIONS))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = fresh_copy(args.db, folder)
        broker = Mosquitto(folder)
        env = {k: v for k, v in daemon_env(broker.port).items()
               if k.startswith(("CHORUS__MQTT__", "CHORUS__HOUSE__", "CHORUS_LOG")) or not k.startswith("CHORUS")}
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
                a = __import__("asyncio").run(_ask(broker.port, body, body["reply_to"]))
                print(json.dumps({"question": q["question"], "seconds_after_ready": round(time.time() - ready, 1),
                                  "status": a.get("status"), "answer": a.get("answer"), "mode": a.get("mode"),
                                  "timings": a.get("timings"), "evidence": len(a.get("evidence") or [])},
                                 ensure_ascii=False), flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
            broker.stop()
            tail = [ln for ln in log.read_text(errors="replace").splitlines() if "embedded" in ln or "consolidat" in ln]
            print("\n".join("  " + ln[-200:] for ln in tail[-4:]))


if __name__ == "__main__":
    main()
