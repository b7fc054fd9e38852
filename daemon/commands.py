"""The commands behind `chorus`: each opens what it needs, does its work and prints."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from daemon import wiring
from daemon.benchcmd import cmd_bench
from daemon.cliutil import (  # noqa: F401  (UserError and the helpers are this module's interface too)
    UserError,
    clock_of,
    open_store,
    out,
    parse_time,
    progress,
    retrievers_for,
    selection,
    settings_of,
)
from daemon.settings import check_config, redacted


def dispatch(args: argparse.Namespace) -> int:
    handler = {
        "import": cmd_import, "retrieve": cmd_retrieve, "bench": cmd_bench,
        "status": cmd_status, "index": cmd_index, "config": cmd_config, "consolidate": cmd_consolidate,
        "ask": cmd_ask, "run": cmd_run, "replay": cmd_replay, "chat": cmd_chat, "load": cmd_load,
    }.get(args.command)
    if handler is None:  # late: the perception commands import the MQTT and perception stack
        from daemon import perceive

        handler = {"transcribe": perceive.cmd_transcribe, "frames": perceive.cmd_frames}[args.command]
    return handler(args)


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
        days, agents = selection(args)
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
    from assistant.query import Query

    settings = settings_of(args)
    clock = clock_of(settings)
    as_of = parse_time(clock, args.as_of, "--as-of")
    store = open_store(args, settings)
    budget = args.budget or settings.retrieval.budget
    q = Query(args.question, as_of, tuple(args.option), asker=args.asker or settings.retrieval.asker,
              agents=tuple(args.agent) if args.agent else None, budget=budget)
    if args.planner:
        from assistant.answer import Answerer

        llm = wiring.build_llm(settings) if args.planner == "llm" else None
        got = Answerer(store, clock, settings.answer, llm, budget=budget, planner=args.planner,
                       retrievers=retrievers_for(store, clock, settings)).gather(q)
    else:
        got = retrievers_for(store, clock, settings).make("default").retrieve(q)
    units = [
        {"agent": u.agent, "start": clock.iso(u.start_ms), "end": clock.iso(u.end_ms),
         "start_ms": u.start_ms, "end_ms": u.end_ms, "text": u.text, "ids": list(u.obs_ids),
         "score": u.score}
        for u in got.units
    ]
    data = {"question": args.question, "as_of": clock.iso(as_of), "as_of_ms": as_of, "units": units,
            "timings_ms": {k: round(v, 2) for k, v in got.timings_ms.items()}}
    if args.planner:
        data["plan"] = {"planner": got.planner, "requests": [{"agent": r.agent, "query": r.query} for r in got.requests]}
        data["events"] = [{"who": list(e.who), "what": e.what, "start": clock.iso(e.start_ms)} for e in got.events]
    lines = [f"{len(units)} unit(s) for {args.question!r} as of {clock.label(as_of)}:"]
    for u in got.units:
        lines.append(f"\n[{u.agent} {clock.label(u.start_ms)}  score {u.score:.2f}]\n{u.text}")
    out(args, data, "\n".join(lines))
    return 0


def cmd_status(args) -> int:
    settings = settings_of(args)
    clock = clock_of(settings)
    store = open_store(args, settings)
    counts = store.counts()
    first, last = store.span()
    import asyncio

    from daemon.chat import daemon_status

    m = settings.mqtt
    daemon = asyncio.run(daemon_status(m.host or "127.0.0.1", m.port, m.root, conn=wiring.client_kwargs(settings)))
    from daemon.readiness import backlog, status_text
    from memory.events import EventStore

    pending = EventStore(store).pending_count()
    data = {"db": store.path, "counts": counts, "windows_pending": pending,
            "agents": list(store.agents().values()),
            "first": clock.iso(first) if first else None, "last": clock.iso(last) if last else None,
            "daemon": daemon, "broker": f"{m.host or '127.0.0.1'}:{m.port}",
            "backlog": backlog(store, settings.retrieval.encoder, settings.retrieval.dense).as_dict()}
    out(args, data, status_text(data | {"first": first and clock.label(first), "last": last and clock.label(last)}))
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
    lexical_s = round(time.perf_counter() - t0, 2)
    retrievers_for(store, clock_of(settings), settings, reset=args.rebuild)  # embeds what is new
    data = {"shards": done, "lexical_seconds": lexical_s, "seconds": round(time.perf_counter() - t0, 2)}
    out(args, data, f"indices ready: {done} shards in {lexical_s}s; vectors in {data['seconds'] - lexical_s:.1f}s")
    return 0


def cmd_config(args) -> int:
    settings, problems = check_config(args.config)
    if problems:
        for line in problems:
            print(f"config: {line}", file=sys.stderr)
        return 2
    out(args, redacted(settings), "configuration ok\n" + json.dumps(redacted(settings), indent=2))
    return 0


def cmd_consolidate(args) -> int:
    from assistant.consolidate import Consolidator, now_ms
    from memory.events import EventStore
    from memory.lexical import EVENTS, LexicalIndex

    settings = settings_of(args)
    clock = clock_of(settings)
    start, end = parse_time(clock, args.start, "--from"), parse_time(clock, args.end, "--to")
    until = parse_time(clock, args.until, "--until") or now_ms()
    store = open_store(args, settings)
    llm = None if args.dry_run else wiring.build_llm(settings)
    cons = Consolidator(EventStore(store), llm, clock, settings.consolidation)

    def show(r) -> None:
        if args.dry_run and not args.json:
            print(f"--- {clock.label(r.start_ms)}: {r.prompt_tokens} prompt tokens, {r.lines} lines")
            print("\n\n".join(f"[{m['role']}]\n{m['content']}" for m in r.prompt or []))
        elif r.status == "error":
            print(f"error: {clock.label(r.start_ms)}: {r.error}", file=sys.stderr)

    results = cons.run(until_ms=until, start_ms=start, end_ms=end, dry_run=args.dry_run, force=args.force,
                       progress=progress("consolidate", unit="window"), on_window=show)
    LexicalIndex(store, EVENTS).refresh()
    written = [r for r in results if r.status == "written"]
    data = {
        "windows": len(results), "model": llm.name if llm else None,
        "by_status": {s: sum(r.status == s for r in results) for s in sorted({r.status for r in results})},
        "events": sum(len(r.events) for r in written),
        "seconds": round(sum(r.seconds for r in written), 1),
        "per_window": {
            "seconds": round(sum(r.seconds for r in written) / len(written), 2) if written else None,
            "prompt_tokens": round(sum(r.prompt_tokens for r in written) / len(written)) if written else None,
            "completion_tokens": round(sum(r.completion_tokens for r in written) / len(written)) if written else None,
        },
    }
    if args.dry_run:
        data["prompt_tokens"] = [{"window": clock.label(r.start_ms), "tokens": r.prompt_tokens} for r in results]
    if not args.dry_run or args.json:
        out(args, data, (f"{len(results)} window(s): {data['by_status']}; {data['events']} events written "
                         f"in {data['seconds']}s ({data['per_window']})"))
    return 1 if any(r.status == "error" for r in results) and not written else 0


def cmd_ask(args) -> int:
    from assistant.answer import Answerer, answer_json
    from assistant.query import Query

    settings = settings_of(args)
    clock = clock_of(settings)
    as_of = parse_time(clock, args.as_of, "--as-of")
    if len(args.option) > 4:
        raise UserError("at most four options (A-D)")
    store = open_store(args, settings)
    llm = wiring.build_llm(settings)
    q = Query(args.question, as_of, tuple(args.option), asker=args.asker or settings.retrieval.asker,
              agents=tuple(args.agent) if args.agent else None, budget=settings.retrieval.budget)
    a = Answerer(store, clock, settings.answer, llm, budget=settings.retrieval.budget, planner=args.planner,
                 retrievers=retrievers_for(store, clock, settings)).answer(q)
    data = answer_json(a, clock, as_of)
    lines = [f"{a.answer or '(no answer)'}" + (f"   [error: {a.error}]" if a.error else "")]
    if a.guard:
        lines.append(f"({a.mode}: {a.guard})")
    lines.append("\nevidence" + ("" if a.cited else " (not cited by the model: best retrieved)") + ":")
    for u in a.evidence:
        first = u.text.split("\n")[0][:100]
        lines.append(f"  {u.agent:10} {clock.label(u.start_ms)}  {first}")
    t = data["timings_ms"]
    lines.append(f"\n{data['plan']['planner']} plan {[(r['agent'], r['query']) for r in data['plan']['requests']]}; "
                 f"timings ms {t}; tokens {data['tokens']}, context {data['context']}")
    out(args, data, "\n".join(lines))
    return 0 if a.status == "ok" else 1


def cmd_run(args) -> int:
    from daemon import app
    from daemon.writer_lock import AlreadyRunning, WriterLock

    settings = settings_of(args)
    lock = WriterLock(args.db or settings.store.path)
    try:
        lock.acquire()  # held for the process's life; the kernel lets go when it ends
    except AlreadyRunning as e:
        raise UserError(str(e)) from None
    return app.run(settings, args.db)


def cmd_replay(args) -> int:
    import asyncio

    from streams import egolife
    from streams.jsonl import read_jsonl
    from streams.replay import in_time_order, replay
    from streams.topics import Topics

    settings = settings_of(args)
    clock = clock_of(settings)
    if not args.path.exists():
        raise UserError(f"{args.path} does not exist")
    if args.format == "egolife":
        days, agents = selection(args)
        files = egolife.discover(args.path, days, agents)
        by_hour: dict = {}
        for f in files:
            by_hour.setdefault((f.day, f.hour), []).append(f)
        hours = ([c for f in fs for c in egolife.read_hour(f, clock.at)] for _, fs in sorted(by_hour.items()))
        captions = in_time_order(hours)
    else:
        captions = in_time_order([[c for _, c in read_jsonl(args.path, clock.parse) if not isinstance(c, Exception)]])
    m = settings.mqtt
    t0 = time.perf_counter()
    sent = asyncio.run(replay(
        captions, host=args.host or m.host or "localhost", port=args.port or m.port, topics=Topics(m.root),
        speed=args.speed, limit=args.limit, **wiring.client_kwargs(settings), progress=lambda n: print(f"\r{n} captions sent", end="", file=sys.stderr),
    ))
    seconds = time.perf_counter() - t0
    out(args, {"sent": sent, "seconds": round(seconds, 2)}, f"\nreplayed {sent} captions in {seconds:.1f}s")
    return 0


def cmd_load(args) -> int:
    from daemon import load

    return load.cmd_load(args, settings_of(args), UserError, out)


def cmd_chat(args) -> int:
    import asyncio
    from datetime import datetime

    from daemon import chat

    settings = settings_of(args)
    clock = clock_of(settings)
    m = settings.mqtt
    host = m.host or "127.0.0.1"
    asker = args.asker or settings.retrieval.asker

    def label(iso: str) -> str:
        return clock.label(int(datetime.fromisoformat(iso).timestamp() * 1000))

    conn = wiring.client_kwargs(settings)
    if not args.local and asyncio.run(chat.daemon_online(host, m.port, m.root, conn=conn)):
        def ask(question, options):
            return asyncio.run(chat.ask_over_mqtt(host, m.port, m.root, question, options, asker, conn=conn,
                                                  progress=chat.say_stage))

        return chat.repl(ask, label, f"daemon at {host}:{m.port}")
    from assistant.answer import Answerer, answer_json
    from assistant.query import Query

    store = open_store(args, settings)
    llm = wiring.build_llm(settings)
    answerer = Answerer(store, clock, settings.answer, llm, budget=settings.retrieval.budget,
                        retrievers=retrievers_for(store, clock, settings))

    def ask_local(question, options):
        now = int(time.time() * 1000)
        a = answerer.answer(Query(question, now, tuple(options), asker=asker, budget=settings.retrieval.budget))
        return answer_json(a, clock, now)

    return chat.repl(ask_local, label, f"in process, {store.path}")
