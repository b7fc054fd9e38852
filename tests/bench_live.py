"""Live benchmark (not a test): sustained QoS 1 ingest through mosquitto into the store, and
question latency over MQTT against in process, in one run.

    .venv/bin/python tests/bench_live.py [--captions 20000] [--questions 5] [--durable both]

`--durable both` measures the ingest twice in one run, acknowledging after a synchronous=NORMAL
commit (before) and after a synchronous=FULL one (the default: durable acknowledgement).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiomqtt  # noqa: E402
import sqlean  # noqa: E402

from tests.mqtt_util import Mosquitto, daemon_env, start_daemon  # noqa: E402

QUESTIONS = [
    ("Who used the screwdriver first?", ["Tasha", "Alice", "Shure", "Lucia"], "DAY1 11:21:02"),
    ("Who plans to grow flowers", ["Katrina", "Alice", "Tasha", "Lucia"], "DAY1 11:57:36"),
    ("Whose phone is on the table?", ["Jake", "Alice", "Tasha", "Lucia"], "DAY1 12:02:35"),
    ("What might we do next?", ["puzzle", "dance", "cook", "shop"], "DAY1 12:10:12"),
    ("Who was the first to move the puzzle board on the table?", ["Jake", "Alice", "Tasha", "Lucia"],
     "DAY1 12:51:28"),
]


def count(db: Path) -> int:
    c = sqlean.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return c.execute("SELECT COUNT(*) FROM observations").fetchone()[0]
    finally:
        c.close()


async def publish(port: int, n: int, base_ts: int, prefix: str = "") -> float:
    t0 = time.perf_counter()
    async with aiomqtt.Client("127.0.0.1", port, max_inflight_messages=200) as c:
        for i in range(n):
            body = {"id": f"{prefix}load-{i}", "ts": base_ts + i * 100, "text": f"robot {i % 6} moved box {i} to shelf {i % 40}"}
            await c.publish(f"chorus/v1/agents/robot{i % 6}/caption", json.dumps(body), qos=1)
    return time.perf_counter() - t0


async def ask(port: int, qid: str, q: str, options: list[str], as_of: str) -> float:
    t0 = time.perf_counter()
    async with aiomqtt.Client("127.0.0.1", port) as c:
        await c.subscribe(f"bench/{qid}", qos=1)
        await c.publish("chorus/v1/query", json.dumps({"id": qid, "question": q, "options": options, "as_of": as_of,
                                                       "reply_to": f"bench/{qid}"}), qos=1)
        async for m in c.messages:
            if json.loads(bytes(m.payload)).get("status") in ("ok", "error"):
                return (time.perf_counter() - t0) * 1000
    return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--captions", type=int, default=20000)
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--slice", type=Path, help="a memory to copy for the questions (default: import DAY1 11-13)")
    ap.add_argument("--durable", choices=["on", "off", "both"], default="on", help="daemon.durable_ack")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="chorus-bench-"))
    db = tmp / "live.sqlite"
    env = daemon_env(0)
    if args.slice:
        shutil.copy(args.slice, db)
    else:
        from daemon.cli import main as cli

        os.environ.update({"CHORUS__HOUSE__TIMEZONE": "Asia/Shanghai"})
        egolife = Path(os.environ.get("CHORUS_EGOLIFE", Path(__file__).resolve().parents[2] / "shared/data/egolife"))
        cli(["import", "egolife", str(egolife / "EgoLifeCap"), "--days", "1", "--agents", "A1_JAKE,A2_ALICE,A4_LUCIA",
             "--db", str(db)])
    broker = Mosquitto(tmp)
    ingest, over_mqtt = {}, []
    for n, durable in enumerate({"on": [True], "off": [False], "both": [False, True]}[args.durable]):
        env = daemon_env(broker.port, CHORUS__DAEMON__CONSOLIDATE_EVERY_S="3600", CHORUS__DAEMON__SILENCE_S="3600",
                         CHORUS__DAEMON__DURABLE_ACK=str(durable).lower())
        log = tmp / f"daemon{n}.log"
        proc = start_daemon(db, env, log)
        try:
            deadline = time.time() + 120
            while (not log.exists() or "ready" not in log.read_text()) and time.time() < deadline:
                time.sleep(0.2)
            before = count(db)
            t0 = time.perf_counter()
            pub_s = asyncio.run(publish(broker.port, args.captions, 1_735_700_000_000 + n * 10**8, prefix=f"r{n}-"))
            while count(db) < before + args.captions and time.perf_counter() - t0 < 600:
                time.sleep(0.1)
            stored_s = time.perf_counter() - t0
            stored = count(db) - before
            ingest["durable_ack" if durable else "ack_after_normal_commit"] = {
                "captions": args.captions, "stored": stored, "publish_s": round(pub_s, 2),
                "stored_s": round(stored_s, 2), "captions_per_s": round(stored / stored_s, 1)}
            if durable or args.durable == "off":
                over_mqtt = [asyncio.run(ask(broker.port, f"q{i}", *QUESTIONS[i % len(QUESTIONS)]))
                             for i in range(args.questions)]
            print(json.dumps(ingest), file=sys.stderr, flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(300)  # a batch of background embedding finishes first
            except subprocess.TimeoutExpired:
                proc.kill()
    broker.stop()
    # the same questions in process, same database, same settings
    os.environ.update({k: v for k, v in env.items() if k.startswith("CHORUS")})
    from assistant.query import Query
    from daemon import build
    from daemon.settings import load_settings

    s = load_settings()
    clock = build.clock_of(s)
    store = build.open_store(s, db)
    answerer = build.answerer(s, store, clock, build.llm(s), build.retrievers(store, clock, s))
    in_process = []
    for i in range(args.questions):
        q, opts, as_of = QUESTIONS[i % len(QUESTIONS)]
        t = time.perf_counter()
        answerer.answer(Query(q, clock.parse(as_of), tuple(opts), asker=s.retrieval.asker, budget=s.retrieval.budget))
        in_process.append((time.perf_counter() - t) * 1000)
    print(json.dumps({
        "ingest": ingest,
        "question_ms": {"over_mqtt_p50": round(statistics.median(over_mqtt), 1),
                        "in_process_p50": round(statistics.median(in_process), 1),
                        "over_mqtt": [round(x) for x in over_mqtt], "in_process": [round(x) for x in in_process]},
    }, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
