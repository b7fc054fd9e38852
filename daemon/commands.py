"""The commands behind `chorus`: each opens what it needs, does its work and prints."""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

from tqdm import tqdm

from daemon.settings import Settings, check_config, load_settings, redacted


class UserError(Exception):
    """A mistake on the command line: printed as one line, exit code 2."""


def dispatch(args: argparse.Namespace) -> int:
    handler = {
        "import": cmd_import, "retrieve": cmd_retrieve, "bench": cmd_bench,
        "status": cmd_status, "index": cmd_index, "config": cmd_config,
    }[args.command]
    return handler(args)


# -- shared opening --------------------------------------------------------------------------
def settings_of(args) -> Settings:
    return load_settings(args.config)


def clock_of(settings: Settings):
    from memory.clock import HouseClock

    return HouseClock.of(settings.house.day1, settings.house.timezone)


def open_store(args, settings: Settings):
    from memory.store import Store

    return Store(args.db or settings.store.path)


def progress(desc: str, **kw):
    return partial(tqdm, desc=desc, unit=kw.pop("unit", "file"), file=sys.stderr, disable=None, **kw)


def out(args, data: dict, text: str) -> None:
    print(json.dumps(data, ensure_ascii=False) if args.json else text)


# -- commands --------------------------------------------------------------------------------
def cmd_import(args) -> int:
    from daemon import ingest
    from memory.lexical import LexicalIndex

    settings = settings_of(args)
    clock = clock_of(settings)
    if not args.path.exists():
        raise UserError(f"{args.path} does not exist")
    store = open_store(args, settings)
    t0 = time.perf_counter()
    if args.format == "egolife":
        days = {int(d) for d in args.days.split(",")} if args.days else None
        agents = set(args.agents.split(",")) if args.agents else None
        try:
            report = ingest.import_egolife(
                store, args.path, clock, days=days, agents=agents, progress=progress("import egolife")
            )
        except ingest.egolife.RecordingError as e:
            raise UserError(str(e)) from None
    else:
        report = ingest.import_jsonl(store, args.path, clock)
    seconds = time.perf_counter() - t0
    LexicalIndex(store).refresh()
    data = report.as_dict() | {
        "seconds": round(seconds, 2), "db": store.path, "db_bytes": Path(store.path).stat().st_size,
        "counts": store.counts(), "error_lines": report.errors[:20],
    }
    for e in report.errors[:20]:
        print(f"error: {e}", file=sys.stderr)
    out(args, data, (
        f"imported {report.added.inserted} observations ({report.added.duplicates} already stored, "
        f"{len(report.errors)} errors) from {report.files} file(s) in {seconds:.1f}s; "
        f"memory now {data['counts']['observations']} observations, {data['counts']['segments']} segments"
    ))
    return 1 if report.errors and not report.added.inserted and not report.added.duplicates else 0


def cmd_retrieve(args) -> int:
    from assistant.lexical import LexicalRetriever
    from assistant.query import Query
    from memory.errors import TimeFormatError

    settings = settings_of(args)
    clock = clock_of(settings)
    try:
        as_of = clock.parse(args.as_of)
    except TimeFormatError as e:
        raise UserError(str(e)) from None
    store = open_store(args, settings)
    budget = args.budget or settings.retrieval.budget
    q = Query(args.question, as_of, tuple(args.option), asker=args.asker or settings.retrieval.asker,
              agents=tuple(args.agent) if args.agent else None, budget=budget)
    got = LexicalRetriever(store).retrieve(q)
    units = [
        {"agent": u.agent, "start": clock.iso(u.start_ms), "end": clock.iso(u.end_ms),
         "start_ms": u.start_ms, "end_ms": u.end_ms, "text": u.text, "ids": list(u.obs_ids),
         "score": u.score}
        for u in got.units
    ]
    data = {"question": args.question, "as_of": clock.iso(as_of), "as_of_ms": as_of, "units": units,
            "timings_ms": {k: round(v, 2) for k, v in got.timings_ms.items()}}
    lines = [f"{len(units)} unit(s) for {args.question!r} as of {clock.label(as_of)}:"]
    for u in got.units:
        lines.append(f"\n[{u.agent} {clock.label(u.start_ms)}  score {u.score:.2f}]\n{u.text}")
    out(args, data, "\n".join(lines))
    return 0


def cmd_bench(args) -> int:
    from assistant import bench
    from assistant.egolifeqa import load_items
    from assistant.egomas import EgoMASReference
    from assistant.lexical import LexicalRetriever

    settings = settings_of(args)
    clock = clock_of(settings)
    missing = [str(f) for f in args.files if not f.exists()]
    if missing:
        raise UserError(f"no such file: {', '.join(missing)}")
    items = load_items(args.files, clock)[: args.limit] if args.limit else load_items(args.files, clock)
    store = open_store(args, settings)
    makers = {"default": LexicalRetriever, "egomas-reference": EgoMASReference}
    names = [n.strip() for n in args.retrievers.split(",") if n.strip()]
    unknown = [n for n in names if n not in makers]
    if unknown:
        raise UserError(f"unknown retriever(s) {unknown}; known: {', '.join(makers)}")
    retrievers = {}
    for n in names:
        retrievers[n] = makers[n](store)
        if hasattr(retrievers[n], "index"):
            retrievers[n].index.refresh()
    report = bench.run(items, retrievers, clock, asker="A1_JAKE",
                       budget=args.budget or settings.retrieval.budget,
                       progress=progress("bench", unit="question"))
    out(args, report, bench.table(report))
    return 0


def cmd_status(args) -> int:
    settings = settings_of(args)
    clock = clock_of(settings)
    store = open_store(args, settings)
    counts = store.counts()
    first, last = store.span()
    data = {"db": store.path, "counts": counts, "agents": list(store.agents().values()),
            "first": clock.iso(first) if first else None, "last": clock.iso(last) if last else None}
    span = f"{clock.label(first)} .. {clock.label(last)}" if first else "empty"
    out(args, data, f"{store.path}: {counts} ({span})")
    return 0


def cmd_index(args) -> int:
    from memory.lexical import EVENTS, SEGMENTS, LexicalIndex

    settings = settings_of(args)
    store = open_store(args, settings)
    t0 = time.perf_counter()
    if args.rebuild:
        store.rebuild_segments()
    done = {}
    for src in (SEGMENTS, EVENTS):
        ix = LexicalIndex(store, src)
        ix.rebuild() if args.rebuild else ix.refresh()
        done[src.name] = len(ix.shards)
    data = {"shards": done, "seconds": round(time.perf_counter() - t0, 2)}
    out(args, data, f"indices ready: {done} in {data['seconds']}s")
    return 0


def cmd_config(args) -> int:
    settings, problems = check_config(args.config)
    if problems:
        for line in problems:
            print(f"config: {line}", file=sys.stderr)
        return 2
    out(args, redacted(settings), "configuration ok\n" + json.dumps(redacted(settings), indent=2))
    return 0
