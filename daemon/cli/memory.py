"""The memory commands: `import` recordings, `status`, `index`, `consolidate` windows into events."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import daemon.cli.options as options
from daemon.cli.options import Command
from daemon.cli.support import (
    UserError,
    out,
    parse_time,
    progress,
    retrievers_for,
    selection,
    settings_of,
    store_of,
)


# -- import -------------------------------------------------------------------------------------
def import_arguments(p: argparse.ArgumentParser) -> None:
    for fmt in options.recording_formats(p, "import", ""):
        options.common(fmt)


def cmd_import(args) -> int:
    from daemon import build, recordings
    from memory.lexical import LexicalIndex

    settings = settings_of(args)
    clock = build.clock_of(settings)
    if not args.path.exists():
        raise UserError(f"{args.path} does not exist")
    store = store_of(args, settings)
    t0 = time.perf_counter()
    if args.format == "egolife":
        days, agents = selection(args)
        try:
            report = recordings.import_egolife(
                store, args.path, clock, days=days, agents=agents, progress=progress("import egolife")
            )
        except recordings.egolife.RecordingError as e:
            raise UserError(str(e)) from None
    else:
        report = recordings.import_jsonl(store, args.path, clock)
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


IMPORT = Command("import", "import recordings into the memory",
                 "chorus import egolife ../shared/data/egolife/EgoLifeCap --days 1,2 --db var/chorus.sqlite",
                 import_arguments, cmd_import)


# -- status -------------------------------------------------------------------------------------
def cmd_status(args) -> int:
    import asyncio

    from daemon import build
    from daemon.cli.remote import daemon_status
    from daemon.readiness import backlog, status_text
    from memory.events import EventStore

    settings = settings_of(args)
    clock = build.clock_of(settings)
    store = store_of(args, settings)
    counts = store.counts()
    first, last = store.span()
    m = settings.mqtt
    daemon = asyncio.run(daemon_status(m.host or "127.0.0.1", m.port, m.root, conn=build.client_kwargs(settings)))
    pending = EventStore(store).pending_count()
    data = {"db": store.path, "counts": counts, "windows_pending": pending,
            "agents": list(store.agents().values()),
            "first": clock.iso(first) if first else None, "last": clock.iso(last) if last else None,
            "daemon": daemon, "broker": f"{m.host or '127.0.0.1'}:{m.port}",
            "backlog": backlog(store, settings.retrieval.encoder, settings.retrieval.dense,
                               settings.llm.consolidation_model or settings.llm.model,
                               settings.retrieval.second_encoder).as_dict()}
    out(args, data, status_text(data | {"first": first and clock.label(first), "last": last and clock.label(last)}))
    return 0


STATUS = Command("status", "what the memory holds", "chorus status --db var/chorus.sqlite", options.common, cmd_status)


# -- index --------------------------------------------------------------------------------------
def index_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rebuild", action="store_true", help="rebuild segments and indices from the observations")
    options.common(p)


def cmd_index(args) -> int:
    from daemon import build
    from memory.lexical import EVENTS, SEGMENTS, LexicalIndex

    settings = settings_of(args)
    store = store_of(args, settings)
    t0 = time.perf_counter()
    if args.rebuild:
        store.rebuild_segments()
    done = {}
    for src in (SEGMENTS, EVENTS):
        ix = LexicalIndex(store, src)
        ix.rebuild() if args.rebuild else ix.refresh()
        done[src.name] = len(ix.shards)
    lexical_s = round(time.perf_counter() - t0, 2)
    retrievers_for(store, build.clock_of(settings), settings, reset=args.rebuild)  # embeds what is new
    data = {"shards": done, "lexical_seconds": lexical_s, "seconds": round(time.perf_counter() - t0, 2)}
    out(args, data, f"indices ready: {done} shards in {lexical_s}s; vectors in {data['seconds'] - lexical_s:.1f}s")
    return 0


INDEX = Command("index", "refresh or rebuild the derived indices", "chorus index --rebuild", index_arguments, cmd_index)


# -- consolidate --------------------------------------------------------------------------------
def consolidate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="start", help="only windows ending after this time")
    p.add_argument("--to", dest="end", help="only windows starting before this time")
    p.add_argument("--until", help="windows ending at or before this time are closed (default: now)")
    p.add_argument("--dry-run", action="store_true", help="print prompts and token counts; call no model")
    p.add_argument("--force", action="store_true", help="rebuild windows even when their inputs did not change")
    options.common(p)


def cmd_consolidate(args) -> int:
    from assistant.consolidate import now_ms
    from daemon import build
    from memory.lexical import EVENTS, LexicalIndex

    settings = settings_of(args)
    clock = build.clock_of(settings)
    start, end = parse_time(clock, args.start, "--from"), parse_time(clock, args.end, "--to")
    until = parse_time(clock, args.until, "--until") or now_ms()
    store = store_of(args, settings)
    llm = None if args.dry_run else build.llm(settings, "consolidation")
    cons = build.consolidator(settings, store, clock, llm)

    def show(r) -> None:
        if args.dry_run and not args.json:
            print(f"--- {clock.label(r.start_ms)}: {r.prompt_tokens} prompt tokens, {r.lines} lines")
            print("\n\n".join(f"[{m['role']}]\n{m['content']}" for m in r.prompt or []))
        elif r.status == "error":
            print(f"error: {clock.label(r.start_ms)}: {r.error}", file=sys.stderr)

    results = cons.run(until_ms=until, start_ms=start, end_ms=end, dry_run=args.dry_run, force=args.force,
                       progress=progress("consolidate", unit="window"), on_window=show)
    LexicalIndex(store, EVENTS).refresh()
    data = consolidation_report(results, llm, clock, dry_run=args.dry_run)
    if not args.dry_run or args.json:
        out(args, data, (f"{len(results)} window(s): {data['by_status']}; {data['events']} events written "
                         f"in {data['seconds']}s ({data['per_window']})"))
    written = any(r.status == "written" for r in results)
    return 1 if any(r.status == "error" for r in results) and not written else 0


def consolidation_report(results, llm, clock, *, dry_run: bool) -> dict:
    """What a consolidation run did: windows by status, events written, time and tokens per window."""
    written = [r for r in results if r.status == "written"]

    def per_window(total: float, digits: int | None):
        return round(total / len(written), digits) if written else None

    data = {
        "windows": len(results), "model": llm.name if llm else None,
        "by_status": {s: sum(r.status == s for r in results) for s in sorted({r.status for r in results})},
        "events": sum(len(r.events) for r in written),
        "seconds": round(sum(r.seconds for r in written), 1),
        "per_window": {
            "seconds": per_window(sum(r.seconds for r in written), 2),
            "prompt_tokens": per_window(sum(r.prompt_tokens for r in written), None),
            "completion_tokens": per_window(sum(r.completion_tokens for r in written), None),
        },
    }
    if dry_run:
        data["prompt_tokens"] = [{"window": clock.label(r.start_ms), "tokens": r.prompt_tokens} for r in results]
    return data


CONSOLIDATE = Command("consolidate", "write shared-memory events for closed windows",
                      'chorus consolidate --from "DAY1 11:00" --to "DAY1 13:00" --dry-run',
                      consolidate_arguments, cmd_consolidate)
