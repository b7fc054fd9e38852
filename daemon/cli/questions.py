"""The question commands: `retrieve` (the context an answering model would receive) and `ask`
(an answer from the memory with the local LLM). `bench` and `chat` have modules of their own."""

from __future__ import annotations

import argparse

import daemon.cli.options as options
from daemon.cli.options import Command
from daemon.cli.support import (
    UserError,
    evidence_line,
    out,
    parse_time,
    question_retrievers,
    settings_of,
    store_of,
)


def query_of(args, settings, as_of: int, budget: int):
    """The question of the command line as the retrievers and the answerer take it."""
    from assistant.query import Query

    return Query(args.question, as_of, tuple(args.option), asker=args.asker or settings.retrieval.asker,
                 agents=tuple(args.agent) if args.agent else None, budget=budget)


# -- retrieve -----------------------------------------------------------------------------------
def retrieve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("question")
    options.as_of(p, "only memory recorded before this time ('DAY3 11:21:02', ISO 8601, epoch ms)")
    options.agent(p)
    options.option(p)
    options.asker(p)
    options.budget(p)
    options.planner(p, "EgoMAS retrieval: shared memory, this planner, per-agent units (default: flat BM25)")
    options.common(p)


def cmd_retrieve(args) -> int:
    from daemon import build

    settings = settings_of(args)
    clock = build.clock_of(settings)
    as_of = parse_time(clock, args.as_of, "--as-of")
    store = store_of(args, settings)
    budget = args.budget or settings.retrieval.budget
    q = query_of(args, settings, as_of, budget)
    if args.planner:
        llm = build.llm(settings) if args.planner == "llm" else None
        got = build.answerer(settings, store, clock, llm, question_retrievers(store, clock, settings), budget=budget,
                             planner=args.planner).gather(q)
    else:
        got = question_retrievers(store, clock, settings).make("default").retrieve(q)
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


RETRIEVE = Command("retrieve", "print the context an answering model would receive",
                   'chorus retrieve "Who used the screwdriver first?" --as-of "DAY3 11:21:02" --asker A1_JAKE',
                   retrieve_arguments, cmd_retrieve)


# -- ask ----------------------------------------------------------------------------------------
def ask_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("question")
    options.option(p, "a multiple-choice option (repeatable, A-D)")
    options.as_of(p)
    options.asker(p)
    options.agent(p, "search only these agents (repeatable)")
    options.planner(p)
    options.common(p)


def cmd_ask(args) -> int:
    from assistant.wire import answer_json
    from daemon import build

    settings = settings_of(args)
    clock = build.clock_of(settings)
    as_of = parse_time(clock, args.as_of, "--as-of")
    if len(args.option) > 4:
        raise UserError("at most four options (A-D)")
    store = store_of(args, settings)
    llm = build.llm(settings)
    q = query_of(args, settings, as_of, settings.retrieval.budget)
    a = build.answerer(settings, store, clock, llm, question_retrievers(store, clock, settings),
                       planner=args.planner).answer(q)
    data = answer_json(a, clock, as_of)
    lines = [f"{a.answer or '(no answer)'}" + (f"   [error: {a.error}]" if a.error else "")]
    if a.guard:
        lines.append(f"({a.mode}: {a.guard})")
    lines.append("\nevidence" + ("" if a.cited else " (not cited by the model: best retrieved)") + ":")
    for e in data["evidence"][: len(a.evidence)]:
        lines.append(f"  {e['agent']:10} {clock.label(e['start_ms'])}  {evidence_line(e)}")
    t = data["timings_ms"]
    lines.append(f"\n{data['plan']['planner']} plan {[(r['agent'], r['query']) for r in data['plan']['requests']]}; "
                 f"timings ms {t}; tokens {data['tokens']}, context {data['context']}")
    out(args, data, "\n".join(lines))
    return 0 if a.status == "ok" else 1


ASK = Command("ask", "answer a question from the memory with the local LLM",
              'chorus ask "Who used the screwdriver first?" --option Tasha --option Alice --option Shure '
              '--option Lucia --as-of "DAY3 11:21:02"', ask_arguments, cmd_ask)
