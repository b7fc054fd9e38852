"""The evidence's vote weights, set by leave-one-day-out from one answer benchmark run.

    chorus bench egolifeqa EgoLifeQA_A1_JAKE_DAY1.json EgoLifeQA_A1_JAKE_DAY2.json --db week.sqlite \
        --as-is --answer --cells no-shared --planner rule --json > answers.json
    python tests/bench_vote.py answers.json

Each answer of the run carries the model's cyclic scores of the four options and the evidence's
readings (`assistant.vote`); every weight set of the grid is scored on each day without another
model call. The weights that do best on one day are reported on the other (and the reverse),
which is how `answer.vote_*` were chosen: no weight is set on the figures it is reported with.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assistant.bench import wilson  # noqa: E402
from assistant.vote import combined  # noqa: E402
from models.scoring import log_softmax  # noqa: E402

GRID = {"mentions": (0, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2), "lexical": (0, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2),
        "timing": (0, 0.25, 0.5, 1, 2, 5), "wearer": (0, 0.1, 0.25, 0.5, 1, 2), "encounter": (0, 0.25, 0.5, 1, 2)}


def rows_of(report: dict) -> list[tuple]:
    """(model scores, readings, gold index, day) of every answer that has both."""
    out = []
    for cell in report["cells"].values():
        for a in cell["answers"]:
            if a.get("option_scores") and a.get("readings"):
                readings = {k: np.asarray(v, dtype=np.float64) for k, v in a["readings"].items()}
                out.append((log_softmax(np.asarray(a["option_scores"])), readings, "ABCD".index(a["gold"]), a["day"]))
    return out


def right(rows: list[tuple], weights: dict[str, float], day: int | None = None, model: bool = True) -> list[bool]:
    return [int(np.argmax(combined(m if model else None, r, weights))) == g
            for m, r, g, d in rows if day is None or d == day]


def pct(xs: list[bool]) -> str:
    lo, hi = wilson(sum(xs), len(xs))
    return f"{100 * np.mean(xs):.1f} ({lo}-{hi}, n={len(xs)}, {sum(xs)} right)"


def held_out(days: list[int], grid: list[dict], right_on: Callable[[dict, int], list[bool]]) -> Iterator[tuple]:
    """Leave one day out: for each day, the weights of `grid` best on it (ties go to the smaller
    weights: the least the evidence need say), and every other day answered with them, as
    (the day tuned on, its weights, the day held out, which of its answers are right)."""
    for tune in days:
        best = max(grid, key=lambda w: (np.mean(right_on(w, tune)), -sum(w.values())))
        for other in (d for d in days if d != tune):
            yield tune, best, other, right_on(best, other)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path, help="the --json output of `chorus bench egolifeqa --answer`")
    args = p.parse_args()
    rows = rows_of(json.loads(args.report.read_text()))
    days = sorted({d for *_, d in rows})
    none = dict.fromkeys(GRID, 0.0)
    print(f"{len(rows)} answers; model alone {pct(right(rows, none))}")
    grid = [dict(zip(GRID, w, strict=True)) for w in itertools.product(*GRID.values())]
    held: list[bool] = []
    for tune, best, other, xs in held_out(days, grid, lambda w, day: right(rows, w, day)):
        held += xs
        print(f"set on DAY{tune} {best}: DAY{tune} {pct(right(rows, best, tune))}, held-out DAY{other} {pct(xs)}, "
              f"DAY{other} by the model alone {pct(right(rows, none, other))}")
    print(f"held out, both days pooled: {pct(held)}")


if __name__ == "__main__":
    main()
