"""Where the default retriever's time goes: each stage timed per question over EgoLifeQA.

    .venv/bin/python tests/bench_profile.py --db /tmp/week.sqlite [--sql] [--limit N]

Wraps the stages of `HybridRetriever` (query embedding, vector search with the as-of and agent
filters, BM25 per option, the entity search, fetching the units, the entity levels, pooling and
fusion, selection) with timers and prints the median and p95 of each per question, beside the
whole retrieval. `--sql` searches vectors with sqlite-vec's own k-nearest query instead of the
in-memory matrices (the code before issue 15), for the side-by-side figure. Not a test: run by hand.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assistant import hybrid  # noqa: E402
from assistant.egolifeqa import load_items  # noqa: E402
from assistant.query import Query  # noqa: E402
from assistant.retrievers import Retrievers  # noqa: E402
from daemon import build  # noqa: E402
from daemon.settings import load_settings  # noqa: E402
from memory.store import Store  # noqa: E402

QA = Path(__file__).resolve().parents[2] / "shared" / "data" / "egolife" / "EgoLifeQA"
spent: dict[str, float] = defaultdict(float)
cpu: dict[str, float] = defaultdict(float)  # process CPU time: steadier than wall time on a shared box


def timed(obj, attr: str, stage: str) -> None:
    fn = getattr(obj, attr)

    def wrapper(*a, **kw):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **kw)
        finally:
            spent[stage] += (time.perf_counter() - t0) * 1000
            cpu[stage] += (time.process_time() - c0) * 1000

    setattr(obj, attr, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--limit", type=int)
    ap.add_argument("--sql", action="store_true", help="vector search by sqlite-vec (the code before)")
    args = ap.parse_args()
    settings = load_settings(None)
    clock = build.clock_of(settings)
    store = Store(Path(args.db))
    pool = Retrievers(store, clock, settings.retrieval)
    pool.index.refresh()
    r = pool.make("default")
    seg, e = pool.vectors()
    if args.sql:
        seg.search = seg.search_sql
    timed(e, "embed_query" if hasattr(e, "embed_query") else "embed", "query embedding")
    timed(seg, "search", "vector search (as-of, agents)")
    timed(r, "_lexical_queries", "BM25 query weights")
    timed(r, "_entity_search", "entity search")
    timed(r, "_spans", "candidate spans")
    timed(store, "units", "chosen units from SQL")
    timed(r, "_entity_levels", "entity levels (in scoring)")
    timed(r, "_select", "selection")
    timed(r, "refresh", "index refresh check")
    timed(r, "_score", "scoring (fusion, levels, pooling, context, time)")
    timed(r.index, "search_many", "BM25 per option (one pass)")
    timed(hybrid, "read_intent", "time intent")
    lex = r.index.search

    def lexical(*a, **kw):  # the single BM25 searches: those of the entity search
        t0, c0 = time.perf_counter(), time.process_time()
        out = lex(*a, **kw)
        spent["BM25 (entity search calls)"] += (time.perf_counter() - t0) * 1000
        cpu["BM25 (entity search calls)"] += (time.process_time() - c0) * 1000
        return out

    r.index.search = lexical
    soon = r._dense_queries_soon

    class Waited:  # the main thread's wait for the question's vector (the encoder runs beside it)
        def __init__(self, fut):
            self.fut = fut

        def result(self):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return self.fut.result()
            finally:
                spent["waiting for the question's vector"] += (time.perf_counter() - t0) * 1000
                cpu["waiting for the question's vector"] += (time.process_time() - c0) * 1000

    r._dense_queries_soon = lambda q: (lambda f: None if f is None else Waited(f))(soon(q))
    timed(r, "_ways_in", "chain and events (ways in)")
    timed(r, "_people", "people present")
    items = load_items(sorted(QA.glob("*.json")), clock)[: args.limit]
    per: dict[str, list[float]] = defaultdict(list)
    per_cpu: dict[str, list[float]] = defaultdict(list)
    r.retrieve(Query(items[0].question, items[0].query_ms, items[0].options, asker="A1_JAKE"))  # warm: loads
    for it in items:
        spent.clear()
        cpu.clear()
        c0 = time.process_time()
        got = r.retrieve(Query(it.question, it.query_ms, it.options, asker="A1_JAKE", budget=15))
        for k, v in spent.items():
            per[k].append(v)
            per_cpu[k].append(cpu[k])
        per["retrieval (whole)"].append(got.timings_ms["retrieval"])
        per_cpu["retrieval (whole)"].append((time.process_time() - c0) * 1000)
    print(f"{len(items)} questions, {'sqlite-vec' if args.sql else 'in-memory matrices'}, load {os.getloadavg()}")
    for k, v in sorted(per.items(), key=lambda kv: -np.median(kv[1])):
        c = per_cpu[k]
        print(f"  {k:34} wall p50 {np.median(v):7.2f} ms  p95 {np.percentile(v, 95):7.2f} ms   "
              f"cpu p50 {np.median(c):7.2f} ms  p95 {np.percentile(c, 95):7.2f} ms")


if __name__ == "__main__":
    main()
