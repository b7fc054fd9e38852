"""`chorus bench egolifeqa`: retrievers side by side (with the leave-one-day-out protocol), or
answers with the LLM in the EgoMAS ablation cells."""

from __future__ import annotations

from daemon import wiring
from daemon.cliutil import (
    UserError,
    clock_of,
    open_store,
    out,
    parse_time,
    progress,
    retrievers_for,
    settings_of,
)


def cmd_bench(args) -> int:
    from assistant import bench
    from assistant.egolifeqa import load_items
    settings = settings_of(args)
    clock = clock_of(settings)
    missing = [str(f) for f in args.files if not f.exists()]
    if missing:
        raise UserError(f"no such file: {', '.join(missing)}")
    items = load_items(args.files, clock)[:: max(1, args.every)]
    if args.before:
        before = parse_time(clock, args.before, "--before")
        items = [i for i in items if i.query_ms < before]
    items = items[: args.limit] if args.limit else items
    store = open_store(args, settings)
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
    retrievers = {n: bench.Planned(n, store, clock, settings.answer, pool) if n in bench.PLANNED
                  else pool.make(n, pool_cache=pools[n] if args.loo else None) for n in names}
    budget = args.budget or settings.retrieval.budget
    report = bench.run(items, retrievers, clock, asker="A1_JAKE", budget=budget,
                       context_tokens=settings.answer.context_tokens, store=store,
                       filler=settings.answer.filler_lines, once=settings.answer.speech_once,
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
    from assistant.answer import Answerer

    names = [c.strip() for c in args.cells.split(",") if c.strip()]
    unknown = [c for c in names if c not in CELLS]
    if unknown:
        raise UserError(f"unknown cell(s) {unknown}; known: {', '.join(CELLS)}")
    llm = wiring.build_llm(settings)
    budget = args.budget or settings.retrieval.budget
    shared = retrievers_for(store, clock, settings)  # one embedding model and index for all cells
    cells = {
        n: Answerer(store, clock, settings.answer, llm, shared=CELLS[n][0], dynamic=CELLS[n][1], budget=budget,
                    planner=args.planner, retrievers=shared)
        for n in names
    }
    report = bench.run_answers(items, cells, clock, asker="A1_JAKE", progress=progress("bench", unit="question"),
                               open_mode=args.open)
    report["model"] = llm.name
    report["events_in_memory"] = store.counts()["events"]
    out(args, report, bench.answer_table(report))
    return 0
