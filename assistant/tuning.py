"""Leave-one-day-out weight search: `chorus bench egolifeqa --loo` (no tuning on the numbers reported).

For each day, the weights of `GRID` are chosen on the questions of every other day and the day
left out is measured with them: with DAY1 and DAY2, the weights are set on DAY1 and reported on
DAY2, and the reverse. The search is coordinate-wise (one pass in the order of `GRID`, from the
configured values; a tie keeps the configured value) and maximises Hit@0 + Hit@5min. The weights
searched all act after the candidates are gathered, so each question's candidates are gathered
once and every variant re-scores them: the whole search costs little more than one run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import numpy as np

from assistant.bench import WINDOWS, day_of, hit
from assistant.egolifeqa import QAItem
from assistant.query import Query
from assistant.retrievers import known
from memory.clock import HouseClock

GRID: dict[str, tuple[float, ...]] = {
    "dense_weight": (0.0, 0.3, 0.6, 0.9, 1.2),
    "second_dense_weight": (0.0, 0.15, 0.3, 0.6, 0.9),
    "window_weight": (0.0, 0.15, 0.3, 0.5),
    "hour_weight": (0.0, 0.1, 0.2, 0.4),
    "context_weight": (0.0, 0.1, 0.2, 0.4),
    "entity_weight": (0.0, 0.05, 0.1, 0.2),
    "curation_share": (0.0, 0.1, 0.2, 0.3),
    "chain_weight": (0.0, 0.1, 0.2, 0.4, 0.8),
    "chain_slots": (0, 1, 2, 3),
    "people_weight": (0.0, 0.05, 0.1, 0.2, 0.4),
    "hierarchy_weight": (0.0, 0.05, 0.1, 0.2),
    "spread_minutes": (0.0, 2.0, 5.0, 10.0),
}


def _hits(rows: list[dict]) -> dict:
    out = {k: round(100 * float(np.mean([r[k] for r in rows])), 1) for k in WINDOWS} if rows else {}
    return out | {"n": len(rows)}


def _objective(rows: list[dict], idx: list[int]) -> float:
    return float(np.mean([rows[i]["hit@0"] + rows[i]["hit@5min"] for i in idx])) if idx else 0.0


def leave_one_day_out(
    items: list[QAItem], make: Callable[[dict], object], configured: dict[str, float], clock: HouseClock, *,
    asker: str, budget: int, grid: dict[str, tuple[float, ...]] = GRID,
    progress: Callable[[Iterable], Iterable] = iter,
) -> dict:
    """`make(overrides)` gives a retriever with those `SearchSettings` values (sharing gathered
    candidates); `configured` holds the current value of each weight in `grid`."""
    days = [day_of(i, clock) for i in items]
    if len(set(days)) < 2:
        raise ValueError("leave-one-day-out needs questions of at least two days")
    queries = [Query(i.question, i.query_ms, i.options, asker=asker, budget=budget) for i in items]
    cache: dict[tuple, list[dict]] = {}

    def rows(cfg: dict) -> list[dict]:
        key = tuple(sorted(cfg.items()))
        if key not in cache:
            r = make(cfg)
            run = progress(list(zip(items, queries, strict=True))) if not cache else zip(items, queries, strict=True)
            cache[key] = [{k: hit(r.retrieve(q).units, it.targets, w) for k, w in WINDOWS.items()} | {"type": it.type}
                          for it, q in run]
        return cache[key]

    base = dict(configured)
    folds, held = {}, []
    for d in sorted(set(days)):
        train = [k for k, x in enumerate(days) if x != d]
        test = [k for k, x in enumerate(days) if x == d]
        cfg = dict(base)
        for name, values in grid.items():
            cands = sorted(set(values) | {base[name]})
            cfg[name] = max(cands, key=lambda v, n=name: (_objective(rows(cfg | {n: v}), train), v == base[n]))
        chosen = rows(cfg)
        held.extend(chosen[k] for k in test)
        folds[f"DAY{d}"] = {
            "weights": cfg, "tuned_on": sorted({f"DAY{x}" for x in days if x != d}),
            "held_out": _hits([chosen[k] for k in test]), "configured": _hits([rows(base)[k] for k in test]),
        }
    by_type = defaultdict(list)
    for r in held:
        by_type[r["type"]].append(r)
    return {"folds": folds, "held_out": _hits(held), "configured": _hits(rows(base)),
            "held_out_by_type": {t: _hits(v) for t, v in sorted(by_type.items())}, "variants": len(cache)}


def loo_table(name: str, report: dict) -> str:
    def f(h: dict) -> str:
        return " / ".join(f"{h[k]:.1f}" for k in WINDOWS) + f"  (n={h['n']})"

    lines = [f"{name}: leave-one-day-out, Hit@0 / @30s / @5min ({report['variants']} weight sets scored)"]
    for day, fold in report["folds"].items():
        w = ", ".join(f"{k}={v:g}" for k, v in fold["weights"].items())
        lines.append(f"  {day} held out, weights from {'+'.join(fold['tuned_on'])}: {f(fold['held_out'])}"
                     f"   configured weights: {f(fold['configured'])}\n      {w}")
    lines.append(f"  all days held out: {f(report['held_out'])}   configured weights: {f(report['configured'])}")
    for t, h in report["held_out_by_type"].items():
        lines.append(f"    {t:14} {f(h)}")
    return "\n".join(lines)


def run_loo(items: list[QAItem], pool, names: list[str], clock: HouseClock, *, asker: str, budget: int,
            pools: dict[str, dict] | None = None) -> tuple[dict, str]:
    """The protocol for every hybrid retriever named (`pool`: `assistant.retrievers.Retrievers`;
    `pools`: candidates already gathered per name, e.g. by the bench run before): the report per
    name and its text."""
    reports, texts = {}, []
    configured = {k: float(getattr(pool.settings, k)) for k in GRID}
    for name in names:
        if name.partition("@")[0] in ("lexical", "egomas-reference") or not known(name):
            continue  # nothing to tune (or a planned gathering, `assistant.bench.PLANNED`, not a hybrid retriever)
        shared = (pools or {}).get(name, {})
        # a retriever without a second encoder has no second weight to search
        grid = GRID if getattr(pool.make(name), "second", None) is not None else {
            k: v for k, v in GRID.items() if k != "second_dense_weight"}
        reports[name] = leave_one_day_out(
            items, lambda cfg, n=name, c=shared: pool.make(n, cfg, c), configured, clock, asker=asker, budget=budget,
            grid=grid)
        texts.append(loo_table(name, reports[name]))
    return reports, "\n\n".join(texts)
