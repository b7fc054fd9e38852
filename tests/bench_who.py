"""The open "who" weights, set by leave-one-day-out from one open benchmark run.

    chorus bench egolifeqa EgoLifeQA_A1_JAKE_DAY1.json EgoLifeQA_A1_JAKE_DAY2.json --db week.sqlite \
        --as-is --answer --cells full --planner rule --open --json > open.json
    python tests/bench_who.py open.json

Each open "who" answer of the run carries every candidate's scores (the model's readings of the
names: `total`, `likelihood`, `pmi`; the evidence's: mentions, lexical, wearer). For every reading
of the model and every weight set of the grid, the name each would pick is scored as the benchmark
scores the answer: the answer's sentence with that name ("Alice, around 11:16 on DAY1.") and the
option nearest to it in MiniLM's space. The weights best on one day are reported on the other (and
the reverse): how `answer.open_who` and `answer.who_*` were chosen. Not a test: run by hand.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assistant.egolifeqa import load_items  # noqa: E402
from assistant.query import person_name  # noqa: E402
from assistant.vote import as_asker, combined  # noqa: E402
from daemon import build  # noqa: E402
from daemon.settings import load_settings  # noqa: E402
from models.embed import Embedder  # noqa: E402
from models.scoring import log_softmax  # noqa: E402
from tests.bench_vote import held_out, pct  # noqa: E402

QA = Path(__file__).resolve().parents[2] / "shared" / "data" / "egolife" / "EgoLifeQA"
STEPS = (0, 0.1, 0.2, 0.3, 0.5, 1, 2)
WEIGHTS = ("mentions", "lexical", "wearer")  # `--dense` adds dense_q (the question with the name, near the excerpts)
READINGS = ("total", "likelihood", "pmi", None)  # None: the evidence alone


def rows_of(report: dict, asker: str = "A1_JAKE") -> list[dict]:
    """Per open "who" answer: its day, the candidates' scores, and whether each candidate's
    sentence is nearest to the gold option."""
    clock = build.clock_of(load_settings(None))
    items = {i.id: i for i in load_items(sorted(QA.glob("*.json")), clock)}
    embed = Embedder().embed
    out = []
    for cell in report["cells"].values():
        for a in cell["answers"]:
            p = a.get("people")
            if not p or "total" not in p:
                continue
            item, names = items[a["id"]], p["people"]
            rest = ("," + a["answer"].split(",", 1)[1]) if "," in a["answer"] else "."  # ", around 11:16 on DAY1."
            said = [(f"You ({n})" if n == person_name(asker) else n) + rest for n in names]
            v = embed([*said, *(as_asker(o, asker) for o in item.options)])
            v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)
            near = (v[: len(names)] @ v[len(names):].T).argmax(axis=1)
            out.append({"day": a["day"], "right": near == "ABCD".index(a["gold"]),
                        **{k: np.asarray(p[k], dtype=np.float64) for k in ("total", "likelihood", "pmi")},
                        "evidence": {k: np.asarray(x, dtype=np.float64) for k, x in p["evidence"].items()}})
    return out


def right(rows: list[dict], reading: str | None, weights: dict, day: int | None = None) -> list[bool]:
    return [bool(r["right"][int(np.argmax(combined(log_softmax(r[reading]) if reading else None, r["evidence"], weights)))])
            for r in rows if day is None or r["day"] == day]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path, help="the --json output of `chorus bench egolifeqa --answer --open`")
    p.add_argument("--dense", action="store_true", help="dense_q in the grid too (`answer.who_dense_q`)")
    p.add_argument("--reading", choices=[r or "evidence" for r in READINGS], help="only this reading of the model")
    args = p.parse_args()
    names = (*WEIGHTS, "dense_q") if args.dense else WEIGHTS
    grid = [dict(zip(names, w, strict=True)) for w in itertools.product(STEPS, repeat=len(names))]
    rows = rows_of(json.loads(args.report.read_text()))
    days = sorted({r["day"] for r in rows})
    s = load_settings(None).answer
    configured = {"mentions": s.who_mentions, "lexical": s.who_lexical, "wearer": s.who_wearer}
    reading = s.open_who if s.open_who in READINGS else None
    print(f"{len(rows)} open 'who' answers; the configured {s.open_who} {configured}: {pct(right(rows, reading, configured))}")
    for reading in READINGS:
        if args.reading and (reading or "evidence") != args.reading:
            continue
        held: list[bool] = []
        for tune, best, other, xs in held_out(days, grid, lambda w, day, r=reading: right(rows, r, w, day)):
            held += xs
            print(f"{reading or 'evidence alone'}: set on DAY{tune} {best}: DAY{tune} "
                  f"{pct(right(rows, reading, best, tune))}, held-out DAY{other} {pct(xs)}")
        print(f"{reading or 'evidence alone'}: held out, both days pooled: {pct(held)}")


if __name__ == "__main__":
    main()
