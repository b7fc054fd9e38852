"""The cost curve: the memory at 1x, 3x, 10x the EgoLife week, one question's cost at each size.

    .venv/bin/python tests/bench_scale.py --source /tmp/week.sqlite --sizes 1,3,10 --out /tmp/scale

`--source` is the week imported and embedded with MiniLM (`chorus import egolife`, `chorus
index`). Copy i of the week (i = 0 .. N-1) is the week's observations, their text unchanged, with
the agents renamed for odd i (`A1_JAKE` -> `A1_JAKE_b`: more wearers at the same times) and the
days shifted i // 2 weeks earlier (more days before the questions): at 3x the questions see the
week, a second team beside it and a week before it; at 10x, two teams over five weeks. The
questions (EgoLifeQA DAY1-2, asked as A1_JAKE at their time) are those of copy 0, so what they may
search (recorded before `as_of`) grows faster than the memory: 1x about 9,000 units, 3x about
50,000, 10x about 270,000.

Each size is built through `Store.add` (the import path without the SRT parsing, in batches of
5,000 observations: "import" below). Vectors are not embedded again: a copy's segment has the
very text of the original (renaming agents and shifting days leaves the lines as they are), so
its vector is copied (exact, not an approximation); the time to embed a size is the week's units
times the number of copies over the embedding rate measured here on a sample of `--sample` units
(stated as an estimate). Per size: import, lexical index build, the vectors copied into sqlite-vec
and loaded into memory, retrieval p50/p95 of the default retriever over the questions, RSS, the
SQLite file and index folder sizes, and the refresh after one new caption (lexical shard, and
the vector of the changed unit: embedded, stored, mirrored). Not a test: run by hand; prints a
table and writes `scale.json` under `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import sqlean
import sqlite_vec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assistant.egolifeqa import load_items  # noqa: E402
from assistant.query import Query  # noqa: E402
from assistant.retrievers import Retrievers  # noqa: E402
from daemon import build as parts  # noqa: E402
from daemon.settings import load_settings  # noqa: E402
from memory.clock import DAY_MS  # noqa: E402
from memory.records import Observation  # noqa: E402
from memory.store import Store  # noqa: E402
from memory.tokenize import english_view  # noqa: E402

QA = Path(__file__).resolve().parents[2] / "shared" / "data" / "egolife" / "EgoLifeQA"
WEEK_MS = 7 * DAY_MS


def copies(n: int) -> list[tuple[str, int]]:
    """(agent suffix, shift in ms) of each copy of the week."""
    return [("" if i % 2 == 0 else "_b", -(i // 2) * WEEK_MS) for i in range(n)]


def source_rows(src: Path):
    c = sqlean.connect(str(src))
    c.enable_load_extension(True)
    sqlite_vec.load(c)
    obs = c.execute("""SELECT a.name, o.kind, o.start_ms, o.end_ms, o.text, o.speaker, o.lang, o.ext_id
                       FROM observations o JOIN agents a ON a.id = o.agent_id ORDER BY a.name, o.start_ms""").fetchall()
    vecs = c.execute("""SELECT a.name, s.start_ms, v.embedding FROM vec_segments v JOIN segments s ON s.id = v.rowid
                        JOIN agents a ON a.id = s.agent_id""").fetchall()
    model = c.execute("SELECT model, dim FROM vector_indices WHERE name = 'segments'").fetchone()
    return obs, vecs, model


def build(dst: Path, n: int, obs, vecs, model) -> dict:
    for p in (dst, Path(str(dst) + "-wal"), Path(str(dst) + "-shm")):
        p.unlink(missing_ok=True)
    shutil.rmtree(str(dst) + ".index", ignore_errors=True)
    store = Store(dst)
    t0 = time.perf_counter()
    for suffix, shift in copies(n):
        batch = []
        for agent, kind, s, e, text, speaker, lang, ext in obs:
            batch.append(Observation(agent + suffix, kind, s + shift, e + shift, text, speaker, lang, f"{ext}@{shift}"))
            if len(batch) == 5000:
                store.add(batch)
                batch = []
        store.add(batch)
    imported = time.perf_counter() - t0
    t0 = time.perf_counter()
    ids = {(a, s): i for i, a, s in store.db.execute(
        "SELECT s.id, a.name, s.start_ms FROM segments s JOIN agents a ON a.id = s.agent_id")}
    asof = dict(store.db.execute("SELECT id, last_ms FROM segments"))
    agent_ids = {v: k for k, v in store.agents().items()}
    db = store.db
    with db.atomic() as c:
        c.execute(f"CREATE VIRTUAL TABLE vec_segments USING vec0(embedding float[{model[1]}] distance_metric=cosine, "
                  "asof_ms integer, agent_id integer)")
        for suffix, shift in copies(n):
            rows = []
            for agent, start, emb in vecs:
                i = ids.get((agent + suffix, start + shift))
                if i is not None:
                    rows.append((i, emb, asof[i], agent_ids[agent + suffix]))
            c.executemany("INSERT INTO vec_segments (rowid, embedding, asof_ms, agent_id) VALUES (?, ?, ?, ?)", rows)
        c.execute("INSERT OR REPLACE INTO vector_indices (name, model, dim, rev) VALUES ('segments', ?, ?, ?)",
                  (model[0], model[1], store.revision()))
        c.execute("INSERT OR REPLACE INTO vector_indices (name, model, dim, rev) VALUES ('events', ?, ?, ?)",
                  (model[0], model[1], store.revision()))
    copied = time.perf_counter() - t0
    counts = store.counts()
    store.close()
    return {"import_s": round(imported, 1), "vectors_copy_s": round(copied, 1), "observations": counts["observations"],
            "segments": counts["segments"]}


def measure(dst: Path, items, clock, settings, embed_rate: float, n_vec: int) -> dict:
    store = Store(dst)
    pool = Retrievers(store, clock, settings.retrieval)
    t0 = time.perf_counter()
    pool.index.refresh()
    index_s = time.perf_counter() - t0
    r = pool.make("default")
    seg, e = pool.vectors()
    t0 = time.perf_counter()
    seg.search(e.embed(["warm up"])[0], k=1)
    mirror_s = time.perf_counter() - t0
    lat = []
    for it in items:
        q = Query(it.question, it.query_ms, it.options, asker="A1_JAKE", budget=15)
        got = r.retrieve(q)
        lat.append(got.timings_ms["retrieval"])
    seen = store.db.execute("SELECT COUNT(*) FROM segments WHERE last_ms <= ?", (max(i.query_ms for i in items),)).fetchone()[0]
    # one new caption at the end of the week: today's shard and the changed unit's vector
    last = store.db.execute("SELECT MAX(end_ms) FROM observations").fetchone()[0]
    store.add([Observation("A1_JAKE", "caption", last + 1000, last + 2000, "I put the screwdriver back on the shelf.")])
    t0 = time.perf_counter()
    pool.index.refresh()
    lex_refresh = time.perf_counter() - t0
    t0 = time.perf_counter()
    seg.refresh()
    seg.search(e.embed(["screwdriver"])[0], k=5)
    vec_refresh = time.perf_counter() - t0
    # the peak of this process's own memory (ru_maxrss would carry the parent's across exec)
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    rss = int(status["VmHWM"].split()[0]) / 1024
    idx = sum(f.stat().st_size for f in Path(str(dst) + ".index").rglob("*") if f.is_file())
    out = {
        "retrieval_p50_ms": round(float(np.percentile(lat, 50)), 1),
        "retrieval_p95_ms": round(float(np.percentile(lat, 95)), 1),
        "units_searchable_by_the_last_question": seen,
        "rss_mb_max": round(rss), "vectors_in_memory_mb": round(seg.matrix.nbytes() / 1e6),
        "sqlite_mb": round(dst.stat().st_size / 1e6), "index_mb": round(idx / 1e6),
        "lexical_build_s": round(index_s, 1), "vector_mirror_load_s": round(mirror_s, 2),
        "refresh_after_one_caption_lexical_s": round(lex_refresh, 2),
        "refresh_after_one_caption_vector_s": round(vec_refresh, 2),
        "embed_estimate_s": round(n_vec / embed_rate), "load": os.getloadavg(),
    }
    store.close()
    return out


def embed_rate(obs_src: Path, sample: int) -> float:
    from models.embed import Embedder

    c = sqlean.connect(str(obs_src))
    texts = [v for (t,) in c.execute("SELECT text FROM segments ORDER BY id LIMIT ? OFFSET 4000", (sample * 2,))
             if (v := english_view(t))][:sample]
    e = Embedder()
    t0 = time.perf_counter()
    e.embed(texts)
    return len(texts) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True, type=Path)
    ap.add_argument("--sizes", default="1,3,10")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--sample", type=int, default=512, help="units embedded to measure the rate")
    ap.add_argument("--limit", type=int, help="only the first N questions")
    ap.add_argument("--reuse", action="store_true",
                    help="measure the sizes built by an earlier run under --out again (their build figures kept)")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child process of one size
    ap.add_argument("--rate", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--vectors", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    settings = load_settings(None)
    clock = parts.clock_of(settings)
    items = load_items(sorted(QA.glob("*.json")), clock)[: args.limit]
    if args.measure:
        print(json.dumps(measure(args.measure, items, clock, settings, args.rate, args.vectors)))
        return
    obs, vecs, model = source_rows(args.source)
    rate = embed_rate(args.source, args.sample)
    print(f"source: {len(obs):,} observations, {len(vecs):,} vectors; MiniLM {rate:.1f} units/s on a sample of "
          f"{args.sample}; load {os.getloadavg()}", flush=True)
    old = json.loads((args.out / "scale.json").read_text())["sizes"] if args.reuse else {}
    report = {"embed_units_s": round(rate, 1), "sizes": {}}
    for n in (int(x) for x in args.sizes.split(",")):
        dst = args.out / f"scale{n}.sqlite"
        kept = ("import_s", "vectors_copy_s", "observations", "segments")
        b = {k: old[f"{n}x"][k] for k in kept} if f"{n}x" in old else build(dst, n, obs, vecs, model)
        # measured in a fresh process: its RSS is that of a process serving this memory alone
        cmd = [sys.executable, __file__, "--source", str(args.source), "--out", str(args.out), "--measure", str(dst),
               "--rate", str(rate), "--vectors", str(len(vecs) * n)] + (["--limit", str(args.limit)] if args.limit else [])
        m = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        report["sizes"][f"{n}x"] = row = b | m
        print(f"{n}x: {json.dumps(row)}", flush=True)
        (args.out / "scale.json").write_text(json.dumps(report, indent=1))
    base = report["sizes"].get("1x")
    if base:
        for k, row in report["sizes"].items():
            print(f"{k}: p50 {row['retrieval_p50_ms']} ms = {row['retrieval_p50_ms'] / base['retrieval_p50_ms']:.2f} x "
                  f"the 1x value")


if __name__ == "__main__":
    main()
