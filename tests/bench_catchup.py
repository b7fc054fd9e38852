"""Questions first, measured: a question's latency while the daemon catches up, against idle.

    .venv/bin/python tests/bench_catchup.py --db week.sqlite --every 16

One process wired as `chorus run` wires its parts (`daemon/build.py`): one model for answering
and consolidating, one `Foreground`, questions through `Asking.answer` (the door every question
takes), the consolidator taking the pending windows newest first in a thread of its own, as the
daemon's catch-up does after an import or downtime. The same questions (EgoLifeQA DAY1-2, every
K-th, multiple choice, asked as A1_JAKE at their own time) are answered idle, then again while
the consolidation runs. Reported: each phase's answer latency p50 / p95, their ratio (the issue's
target: within 1.3x), the windows consolidated meanwhile and the times background work paused.
The memory is copied first (consolidating writes events); the original is not touched.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from itertools import takewhile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assistant.egolifeqa import load_items  # noqa: E402
from assistant.query import Query  # noqa: E402
from daemon import build  # noqa: E402
from daemon.asking import Asking  # noqa: E402
from daemon.settings import load_settings  # noqa: E402
from models.yielding import Foreground  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "egolife" / "EgoLifeQA"


def copy_memory(db: Path, into: Path) -> Path:
    out = into / db.name
    for p in db.parent.glob(db.name + "*"):
        (shutil.copytree if p.is_dir() else shutil.copy2)(p, into / p.name)
    return out


def ask_all(asking: Asking, items, clock) -> list[dict]:
    rows = []
    for it in items:
        t0 = time.perf_counter()
        a = asking.answer(Query(it.question, it.query_ms, it.options, asker="A1_JAKE"))
        rows.append({"id": it.id, "seconds": round(time.perf_counter() - t0, 2), "choice": a.choice,
                     "right": a.choice == it.answer, "status": a.status})
    return rows


def summary(rows: list[dict]) -> dict:
    s = np.array([r["seconds"] for r in rows])
    return {"n": len(rows), "p50_s": round(float(np.percentile(s, 50)), 2), "p95_s": round(float(np.percentile(s, 95)), 2),
            "right": sum(r["right"] for r in rows)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", type=Path, required=True, help="a memory with windows not consolidated yet")
    p.add_argument("--every", type=int, default=16, help="every K-th question of DAY1-2")
    p.add_argument("--json", type=Path, help="also write the report here")
    args = p.parse_args()
    s = load_settings(None)
    clock = build.clock_of(s)
    items = load_items(sorted(DATA.glob("EgoLifeQA_A1_JAKE_DAY[12].json")), clock)[:: args.every]
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        db = copy_memory(args.db, Path(tmp))
        foreground, stop = Foreground(), threading.Event()
        model = build.llm(s)
        writer = build.llm(s, "consolidation")  # the same instance unless configured apart, as in the daemon
        serving = build.retrievers(build.open_store(s, db), clock, s)
        asking = Asking(build.answerer(s, serving.store, clock, model, serving), clock, asker="A1_JAKE",
                        budget=s.retrieval.budget, foreground=foreground)
        consolidator = build.consolidator(s, build.open_store(s, db), clock, writer, foreground)
        pending = len(consolidator.events.pending_windows(max(i.query_ms for i in items) + 86_400_000))
        ask_all(asking, items[:1], clock)  # warm: models loaded, the index read, the prompt cache made
        idle = ask_all(asking, items, clock)
        done: list = []

        def catch_up() -> None:
            until = max(i.query_ms for i in items) + 86_400_000
            while not stop.is_set():
                done.extend(consolidator.run(until_ms=until,
                                             progress=lambda ws: takewhile(lambda _: not stop.is_set(), ws)))

        worker = threading.Thread(target=catch_up, daemon=True)
        t0 = time.perf_counter()
        worker.start()
        time.sleep(5)  # the first window's prompt under way
        busy = ask_all(asking, items, clock)
        stop.set()
        foreground.close()
        worker.join(timeout=600)
        report = {"questions": len(items), "pending_windows": pending, "idle": summary(idle),
                  "catching_up": summary(busy),
                  "ratio_p50": round(summary(busy)["p50_s"] / summary(idle)["p50_s"], 2),
                  "ratio_p95": round(summary(busy)["p95_s"] / summary(idle)["p95_s"], 2),
                  "windows": {st: sum(r.status == st for r in done) for st in {r.status for r in done}},
                  "catch_up_s": round(time.perf_counter() - t0, 1), "pauses": foreground.counts,
                  "model": model.name, "answers": {"idle": idle, "catching_up": busy}}
    print(json.dumps({k: v for k, v in report.items() if k != "answers"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
