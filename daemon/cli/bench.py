"""`chorus bench egolifeqa`: retrievers side by side (with the leave-one-day-out protocol), or
answers with the LLM in the EgoMAS ablation cells."""

from __future__ import annotations

import argparse
from pathlib import Path

import daemon.cli.options as options
from daemon.cli.options import Command
from daemon.cli.support import UserError, out, parse_time, progress, retrievers_for, settings_of, store_of


def bench_arguments(p: argparse.ArgumentParser) -> None:
    suites = options.commands(p, "suite")
    eq = options.command(suites, "egolifeqa", "EgoLifeQA JSON files, asked as A1_JAKE at each query time",
                         "chorus bench egolifeqa EgoLifeQA_A1_JAKE_DAY1.json EgoLifeQA_A1_JAKE_DAY2.json --answer "
                         "--every 5")
    eq.add_argument("files", nargs="+", type=Path)
    eq.add_argument("--limit", type=int, help="only the first N questions")
    eq.add_argument("--every", type=int, default=1, help="only every K-th question (a spread-out sample)")
    eq.add_argument("--offset", type=int, default=0,
                    help="with --every: start at the N-th question (0 to K-1: the K samples are disjoint)")
    eq.add_argument("--retrievers", default="default,egomas-reference",
                    help="comma-separated retrievers to compare; a hybrid one may end in @ENCODER "
                         "(default@minilm,default@use-multilingual)")
    eq.add_argument("--before", help="only the questions asked before this time ('DAY3 00:00')")
    eq.add_argument("--as-is", action="store_true",
                    help="measure the vectors as they are, without embedding the units not embedded yet (with "
                         "--before: a memory embedded up to then, in store order, which is the order of time)")
    eq.add_argument("--loo", action="store_true",
                    help="also leave-one-day-out: each day measured with weights searched on the other days")
    options.budget(eq, "fine units per context (default: retrieval.budget)")
    eq.add_argument("--answer", action="store_true", help="answer with the LLM: accuracy and the EgoMAS ablation")
    eq.add_argument("--cells", default="full,no-shared,no-dynamic,neither",
                    help="ablation cells with --answer: full, no-shared, no-dynamic, neither")
    options.planner(eq, "planner for --answer (default: answer.planner)")
    eq.add_argument("--open", action="store_true",
                    help="with --answer: ask without the options and count how answers were made (model, extractive, "
                         "not found, timed)")
    options.common(eq)


def cmd_bench(args) -> int:
    from assistant import bench
    from assistant.egolifeqa import load_items
    from daemon import build

    settings = settings_of(args)
    clock = build.clock_of(settings)
    missing = [str(f) for f in args.files if not f.exists()]
    if missing:
        raise UserError(f"no such file: {', '.join(missing)}")
    items = load_items(args.files, clock)[max(0, args.offset):: max(1, args.every)]
    if args.before:
        before = parse_time(clock, args.before, "--before")
        items = [i for i in items if i.query_ms < before]
    items = items[: args.limit] if args.limit else items
    store = store_of(args, settings)
    if args.answer:
        return bench_answers(args, settings, clock, store, items)
    from assistant.retrievers import ENCODERS, NAMES, known

    names = [n.strip() for n in args.retrievers.split(",") if n.strip()]
    unknown = [n for n in names if not known(n) and n not in bench.PLANNED]
    if unknown:
        raise UserError(f"unknown retriever(s) {unknown}; known: {', '.join((*NAMES, *bench.PLANNED))}; a hybrid "
                        f"one may end in @ENCODER ({', '.join(ENCODERS)})")
    pool = retrievers_for(store, clock, settings, encoders=tuple({n.partition("@")[2] for n in names} - {""}),
                          embed=not args.as_is)
    pools: dict[str, dict] = {n: {} for n in names}  # with --loo, the weight search re-scores these
    budget = args.budget or settings.retrieval.budget
    retrievers = {n: bench.Planned(n, store, clock, settings.answer, pool, budget) if n in bench.PLANNED
                  else pool.make(n, pool_cache=pools[n] if args.loo else None) for n in names}
    report = bench.run(items, retrievers, clock, asker="A1_JAKE", budget=budget,
                       context_tokens=settings.answer.context_tokens, store=store,
                       filler=settings.answer.filler_lines, once=settings.answer.speech_once,
                       decay=settings.answer.rank_decay,
                       progress=progress("bench", unit="question"))
    text = bench.table(report)
    if args.loo:
        from assistant.tuning import run_loo

        try:
            report["loo"], more = run_loo(items, pool, names, clock, asker="A1_JAKE", budget=budget, pools=pools)
        except ValueError as e:
            raise UserError(f"--loo: {e}") from None
        text += "\n\n" + more
    out(args, report, text)
    return 0


CELLS = {"full": (True, True), "no-shared": (False, True), "no-dynamic": (True, False), "neither": (False, False)}


def bench_answers(args, settings, clock, store, items) -> int:
    from assistant import bench
    from daemon import build

    names = [c.strip() for c in args.cells.split(",") if c.strip()]
    unknown = [c for c in names if c not in CELLS]
    if unknown:
        raise UserError(f"unknown cell(s) {unknown}; known: {', '.join(CELLS)}")
    llm = build.llm(settings)
    budget = args.budget or settings.retrieval.budget
    pool = retrievers_for(store, clock, settings)  # one embedding model and index for all cells
    cells = {
        n: build.answerer(settings, store, clock, llm, pool, shared=CELLS[n][0], dynamic=CELLS[n][1],
                          budget=budget, planner=args.planner)
        for n in names
    }
    for a in cells.values():  # every reading of the evidence recorded, for tests/bench_vote.py
        a.all_readings = True
    if not args.open:  # every way of choosing from one evaluation of the prompt (the options scored first)
        for a in cells.values():
            a.also_score = settings.answer.choose == "generate"
    embed = None
    if args.open:  # the free answer is scored by the option nearest to it, in MiniLM's space
        from models.embed import Embedder

        embed = Embedder().embed
    report = bench.run_answers(items, cells, clock, asker="A1_JAKE", progress=progress("bench", unit="question"),
                               open_mode=args.open, embed=embed)
    report["model"] = llm.name
    report["events_in_memory"] = store.counts()["events"]
    out(args, report, bench.answer_table(report))
    return 0


BENCH = Command("bench", "measure retrieval and answers on a question set",
                "chorus bench egolifeqa EgoLifeQA_A1_JAKE_DAY1.json --limit 50", bench_arguments, cmd_bench)
