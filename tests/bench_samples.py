"""Which of several open replies to show, set by leave-one-day-out from one open benchmark run.

    CHORUS__ANSWER__OPEN_SAMPLES=5 chorus bench egolifeqa EgoLifeQA_A1_JAKE_DAY1.json \
        EgoLifeQA_A1_JAKE_DAY2.json --db week.sqlite --as-is --answer --open --cells no-shared \
        --planner rule --json > open.json
    python tests/bench_samples.py open.json EgoLifeQA_A1_JAKE_DAY1.json EgoLifeQA_A1_JAKE_DAY2.json

Each open answer the model wrote carries every reply drawn (`assistant.samples`: the greedy one
first) with how much the others agree with it and how near it lies to the excerpts shown. Each
way of choosing (the greedy reply alone; agree, support or both, over the first k replies) is
scored as the benchmark scores an open answer, by the option nearest the reply in MiniLM's space,
without another model call. The way best on one day is reported on the other, and the reverse.
The replies are the guard's shown text, before the source is added (`with_source`), so a reply
chosen here reads a little shorter than the benchmark's answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assistant.bench import nearest_option  # noqa: E402
from assistant.egolifeqa import load_items  # noqa: E402
from daemon import build  # noqa: E402
from daemon.settings import load_settings  # noqa: E402
from tests.bench_vote import pct  # noqa: E402


def ways(most: int) -> list[tuple[str, int]]:
    return [("greedy", 1)] + [(how, k) for k in range(3, most + 1)
                              for how in ("agree", "support", "both", "pmi", "likelihood")]


def pick(s: dict, how: str, k: int) -> int:
    """The reply `how` shows among the first `k` drawn (as `samples.chosen`, ties to the earliest)."""
    texts = s["texts"][:k]
    if how == "greedy" or len(texts) < 2:
        return 0
    sims = np.asarray(s["sim"])[:k, :k]
    agree = (sims.sum(axis=1) - np.diag(sims)) / (len(texts) - 1)
    support = np.asarray(s["support"][:k])
    if how in ("pmi", "likelihood"):  # the model's readings (recorded since the twenty-fourth round)
        return int(np.argmax(s[how][:k])) if how in s else 0
    total = {"agree": agree, "support": support,
             "both": agree + (support / max(support.max(), 1e-9) if support.any() else 0)}[how]
    return int(np.argmax(total))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path, help="the --json output of `chorus bench egolifeqa --answer --open`")
    p.add_argument("questions", type=Path, nargs="+", help="the EgoLifeQA files it asked")
    args = p.parse_args()
    from models.embed import Embedder
    from models.multilingual import MultilingualEncoder

    minilm, use = Embedder(), MultilingualEncoder()
    items = {i.id: i for i in load_items(args.questions, build.clock_of(load_settings(None)))}
    rows = []
    for cell in json.loads(args.report.read_text())["cells"].values():
        for a in cell["answers"]:
            s = a.get("samples")
            if not s:
                continue
            v = use.embed(s["texts"])
            s["sim"] = (v @ v.T).tolist()
            options = [o for o in items[a["id"]].options if o]
            right = [nearest_option(minilm.embed, t, options, "A1_JAKE")[0] == a["gold"] for t in s["texts"]]
            rows.append((s, right, a["day"]))
    most = max(len(s["texts"]) for s, _, _ in rows)
    grid = [{"how": h, "k": k} for h, k in ways(most)]

    def right_on(w: dict, day: int | None) -> list[bool]:
        return [r[pick(s, w["how"], w["k"])] for s, r, d in rows if day is None or d == day]

    print(f"{len(rows)} open answers with several replies; any reply right {pct([any(r) for _, r, _ in rows])}")
    for w in grid:
        print(f"  {w['how']:8s} of {w['k']}: {pct(right_on(w, None))}")
    held: list[bool] = []
    days = sorted({d for *_, d in rows})
    for tune in days:  # ties go to the earlier way: the greedy reply, then fewer replies
        best = max(grid, key=lambda w: (np.mean(right_on(w, tune)), -grid.index(w)))
        other = next(d for d in days if d != tune)
        xs = right_on(best, other)
        held += xs
        print(f"set on DAY{tune} {best}: held-out DAY{other} {pct(xs)}, greedy {pct(right_on(grid[0], other))}")
    print(f"held out, both days pooled: {pct(held)}")


if __name__ == "__main__":
    main()
