"""`chorus chat`: ask questions interactively, of a running daemon over MQTT, or in process.

History is kept in ~/.chorus_history; Ctrl-C drops the current question, Ctrl-D (or `quit`)
leaves. Options are written after the question with ` | `: `Who cooked? | Alice | Tasha`.
`--as-of "DAY1 11:21:02"` asks every question as of that moment (a recording asked about after
the fact: "first", "just now" and "this morning" are then read from there, not from today).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import daemon.cli.options as options
from daemon.cli.options import Command
from daemon.cli.support import evidence_line, parse_time, question_retrievers, settings_of, store_of

HISTORY = Path(os.environ.get("CHORUS_HISTORY", Path.home() / ".chorus_history"))


def parse_line(line: str) -> tuple[str, list[str]]:
    parts = [p.strip() for p in line.split("|")]
    return parts[0], [p for p in parts[1:] if p][:4]


def show(answer: dict, label: Callable[[str], str]) -> str:
    if answer.get("status") != "ok":
        return f"error ({answer.get('code', '?')}): {answer.get('error')}"
    lines = [answer.get("answer") or "(no answer)", ""]
    if answer.get("guard"):
        lines.insert(1, f"({answer.get('mode')}: {answer['guard']})")
    for e in answer.get("evidence", [])[:8]:
        mark = "*" if e.get("cited") else " "
        lines.append(f" {mark} {e['agent']:<11} {label(e['start'])}  {evidence_line(e)}")
    t = answer.get("timings_ms", {})
    lines.append(f"   ({', '.join(f'{k} {v:.0f} ms' for k, v in t.items())})")
    return "\n".join(lines)


def repl(ask: Callable[[str, list[str]], dict], label: Callable[[str], str], where: str) -> int:
    try:
        import readline

        if HISTORY.exists():
            readline.read_history_file(HISTORY)
    except (ImportError, OSError):
        readline = None  # type: ignore[assignment]
    print(f"chorus chat ({where}). Ask a question; options after ' | '; Ctrl-D to leave.", file=sys.stderr)
    try:
        while True:
            try:
                line = input("? ").strip()
            except KeyboardInterrupt:
                print(file=sys.stderr)
                continue
            if line.lower() in ("quit", "exit"):
                break
            if not line:
                continue
            question, options = parse_line(line)
            t0 = time.perf_counter()
            try:
                print(show(ask(question, options), label))
            except KeyboardInterrupt:
                print("\n(cancelled)", file=sys.stderr)
            except (TimeoutError, OSError) as e:
                print(f"error: {e}", file=sys.stderr)
            print(f"   [{time.perf_counter() - t0:.1f}s]", file=sys.stderr)
    except EOFError:
        print(file=sys.stderr)
    finally:
        if readline is not None:
            try:
                readline.write_history_file(HISTORY)
            except OSError:
                pass
    return 0


def chat_arguments(p: argparse.ArgumentParser) -> None:
    options.asker(p, "who asks: 'I' in the questions means this agent")
    p.add_argument("--local", action="store_true", help="answer in process even when a daemon runs")
    options.as_of(p, "ask every question as of this time ('DAY1 11:21:02', ISO 8601, epoch ms; default: now)")
    options.common(p)


def cmd_chat(args) -> int:
    import asyncio
    from datetime import datetime

    from daemon import build
    from daemon.cli.remote import ask_over_mqtt, daemon_online, say_stage

    settings = settings_of(args)
    clock = build.clock_of(settings)
    m = settings.mqtt
    host = m.host or "127.0.0.1"
    asker = args.asker or settings.retrieval.asker
    at = None if args.as_of in (None, "", "now") else parse_time(clock, args.as_of, "--as-of")
    when = f", as of {clock.label(at)}" if at is not None else ""

    def label(iso: str) -> str:
        return clock.label(int(datetime.fromisoformat(iso).timestamp() * 1000))

    conn = build.client_kwargs(settings)
    if not args.local and asyncio.run(daemon_online(host, m.port, m.root, conn=conn)):
        def ask(question, choices):
            return asyncio.run(ask_over_mqtt(host, m.port, m.root, question, choices, asker, conn=conn,
                                             progress=say_stage, as_of=None if at is None else clock.iso(at)))

        return repl(ask, label, f"daemon at {host}:{m.port}{when}")
    ask_local, path = local_asker(args, settings, clock, asker, at)
    return repl(ask_local, label, f"in process, {path}{when}")


def local_asker(args, settings, clock, asker: str | None, at: int | None = None):
    """Questions answered in this process, as of `at` (None: now): ((question, options) -> the
    answer JSON of the daemon, the memory's path)."""
    from assistant.query import Query
    from assistant.wire import answer_json
    from daemon import build

    store = store_of(args, settings)
    answerer = build.answerer(settings, store, clock, build.llm(settings), question_retrievers(store, clock, settings))

    def ask_local(question, choices):
        now = at if at is not None else int(time.time() * 1000)
        a = answerer.answer(Query(question, now, tuple(choices), asker=asker, budget=settings.retrieval.budget))
        return answer_json(a, clock, now)

    return ask_local, store.path


CHAT = Command("chat", "ask questions interactively (daemon or in process)", "chorus chat --asker A1_JAKE",
               chat_arguments, cmd_chat)
