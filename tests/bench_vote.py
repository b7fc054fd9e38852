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
from assistant.vote import standardised  # noqa: E402
from models.scoring import log_softmax  # noqa: E402

GRID = {"mentions": (0, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2), "lexical": (0, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2),
        "timing": (0, 0.25, 0.5, 1, 2, 5), "wearer": (0, 0.1, 0.25, 0.5, 1, 2), "encounter": (0, 0.25, 0.5, 1, 2),
        "dense": (0, 0.1, 0.25, 0.5, 1, 2), "dense_q": (0, 0.1, 0.25, 0.5, 1, 2),
        "dense_top": (0, 0.1, 0.25, 0.5, 1, 2)}


def rows_of(report: dict) -> list[tuple]:
    """(model scores, readings, gold index, day) of every answer that has both."""
    out = []
    for cell in report["cells"].values():
        for a in cell["answers"]:
            if a.get("option_scores") and a.get("readings"):
                readings = {k: np.asarray(v, dtype=np.float64) for k, v in a["readings"].items()}
                out.append((log_softmax(np.asarray(a["option_scores"])), readings, "ABCD".index(a["gold"]), a["day"]))
    return out


class Table:
    """The rows as arrays, so that every weight set of a grid is scored at once: the model's
    log-probabilities [n, 4] (-inf past a question's options), each reading standardised [n, 4, k]
    (zero where a run did not record it), the gold option and the day."""

    def __init__(self, rows: list[tuple], names: list[str]):
        n = len(rows)
        self.names = names
        self.model = np.full((n, 4), -np.inf)
        self.readings = np.zeros((n, 4, len(names)))
        for i, (m, r, _, _) in enumerate(rows):
            self.model[i, : len(m)] = m
            for j, name in enumerate(names):
                if name in r:
                    self.readings[i, : len(m), j] = standardised(r[name])
        self.gold = np.array([g for _, _, g, _ in rows])
        self.day = np.array([d for *_, d in rows])

    def right(self, weights: np.ndarray, day: int | None = None, model: bool = True) -> np.ndarray:
        """[c, n'] which answers each of the weight sets [c, k] gets right (of `day`'s rows)."""
        keep = slice(None) if day is None else self.day == day
        m, r = self.model[keep], self.readings[keep]
        base = m if model else np.where(np.isfinite(m), 0.0, -np.inf)
        out = []
        for s in range(0, len(weights), 4096):
            total = base[None] + np.einsum("ck,nok->cno", weights[s:s + 4096], r)
            out.append(total.argmax(axis=2) == self.gold[keep][None])
        return np.concatenate(out) if out else np.zeros((0, len(m)), dtype=bool)


def right(rows: list[tuple], weights: dict[str, float], day: int | None = None, model: bool = True) -> list[bool]:
    t = Table(rows, list(weights))
    return list(t.right(np.array([list(weights.values())], dtype=np.float64), day, model)[0])


def pct(xs) -> str:
    xs = list(xs)
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


def held_out_table(table: Table, grid: np.ndarray) -> Iterator[tuple]:
    """`held_out` of every weight set of `grid` [c, k] at once."""
    days = sorted(set(table.day.tolist()))
    for tune in days:
        acc = table.right(grid, tune).mean(axis=1)
        best = grid[np.lexsort((grid.sum(axis=1), -acc))[0]]
        for other in (d for d in days if d != tune):
            yield tune, dict(zip(table.names, best.tolist(), strict=True)), other, table.right(best[None], other)[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path, help="the --json output of `chorus bench egolifeqa --answer`")
    p.add_argument("--without", nargs="*", default=[], choices=list(GRID), help="readings left out of the grid")
    args = p.parse_args()
    rows = rows_of(json.loads(args.report.read_text()))
    names = [n for n in GRID if n not in args.without]
    table = Table(rows, names)
    none = np.zeros((1, len(names)))
    print(f"{len(rows)} answers; model alone {pct(table.right(none)[0])}")
    grid = np.array(list(itertools.product(*(GRID[n] for n in names))), dtype=np.float64)
    held: list[bool] = []
    for tune, best, other, xs in held_out_table(table, grid):
        held += xs.tolist()
        w = np.array([list(best.values())])
        print(f"set on DAY{tune} {best}: DAY{tune} {pct(table.right(w, tune)[0])}, held-out DAY{other} {pct(xs)}, "
              f"DAY{other} by the model alone {pct(table.right(none, other)[0])}")
    print(f"held out, both days pooled: {pct(held)}")


if __name__ == "__main__":
    main()
