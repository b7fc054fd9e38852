"""`chorus bench egolifeqa`: Hit@W, context size and latency of retrievers side by side."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

import numpy as np

from assistant import vote
from assistant.answer import Answerer
from assistant.config import AnswerSettings
from assistant.context import fit_units, shown_lines
from assistant.egolifeqa import QAItem
from assistant.guard import DEGENERATE_KINDS, garbage
from assistant.query import Query, Retrieved
from memory.clock import HouseClock
from memory.records import Unit
from memory.tokenize import estimate_tokens

WINDOWS = {"hit@0": 0, "hit@30s": 30_000, "hit@5min": 300_000}


def hit(units: list[Unit], targets: Iterable[int], w_ms: int) -> bool:
    """Some fine unit (span at most 60 s) has start - W <= t <= end + W for a target t."""
    ts = list(targets)
    return any(
        u.end_ms - u.start_ms <= 60_000 and u.start_ms - w_ms <= t <= u.end_ms + w_ms
        for u in units for t in ts
    )


def shown_hits(store, units: list[Unit], shown: list[list[str]], targets: Iterable[int]) -> dict[str, bool]:
    """Hit@W of what the answerer reads: a line shown (of a fine unit) whose observation has
    start - W <= t <= end + W for a target t; a unit cut to lines far from the moment does not count."""
    ts = list(targets)
    ids = [i for u in units for i in u.obs_ids]
    times: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for start, end, line in store.line_times(ids):
        times[line].append((start, end))
    spans = [se for u, lines in zip(units, shown, strict=True) if u.end_ms - u.start_ms <= 60_000
             for line in lines for se in times.get(line, [(u.start_ms, u.end_ms)])]
    return {f"shown{k[3:]}": any(a - w <= t <= b + w for a, b in spans for t in ts) for k, w in WINDOWS.items()}


SHOWN = [f"shown{k[3:]}" for k in WINDOWS]


def summarize(rows: list[dict]) -> dict:
    if not rows:
        return {}
    lat = np.array([r["latency_ms"] for r in rows])
    out = {k: round(100 * float(np.mean([r[k] for r in rows])), 1) for k in [*WINDOWS, *SHOWN] if k in rows[0]}
    out["units"] = round(float(np.mean([r["units"] for r in rows])), 2)
    out["tokens"] = round(float(np.mean([r["tokens"] for r in rows])), 1)
    if "unit_tokens" in rows[0]:
        out["unit_tokens"] = round(float(np.mean([r["unit_tokens"] for r in rows])), 1)
    out["latency_ms_p50"] = round(float(np.percentile(lat, 50)), 2)
    out["latency_ms_p95"] = round(float(np.percentile(lat, 95)), 2)
    out["n"] = len(rows)
    return out


def day_of(item: QAItem, clock: HouseClock) -> int:
    """The day a question is about: that of its (earliest) target moment, as the EgoLifeQA files
    are cut (`..._DAY1.json` holds the questions whose evidence lies on DAY1)."""
    return clock.day_of(min(item.targets))[0]


def run(
    items: list[QAItem], retrievers: dict, clock: HouseClock, *, asker: str, budget: int,
    context_tokens: int = 4600, progress: Callable[[Iterable], Iterable] = iter, store=None,
    filler: int | None = None, once: bool = False, decay: float = 0.5,
) -> dict:
    """Every item through every retriever; per retriever overall, per question type and per day.
    Tokens are those of the context as the answerer gets it: the units cut to fit `context_tokens`;
    `unit_tokens` those of the units handed over, in full."""
    rows: dict[str, list[dict]] = defaultdict(list)
    for item in progress(items):
        q = Query(item.question, item.query_ms, item.options, asker=asker, budget=budget)
        for name, r in retrievers.items():
            got = r.retrieve(q)
            row = {k: hit(got.units, item.targets, w) for k, w in WINDOWS.items()}
            lex = getattr(r, "lexical", None)
            also = lex.same_words(" ".join((q.question, *q.options))) if hasattr(lex, "same_words") else frozenset()
            shown = shown_lines(got.units, q, context_tokens, estimate_tokens, clock.label, filler, once, decay,
                                also) if got.units else []
            if store is not None:
                row |= shown_hits(store, got.units, [lines for _, lines in shown], item.targets)
            row.update(
                type=item.type, id=item.id, day=day_of(item, clock), units=len(got.units),
                tokens=estimate_tokens(fit_units(got.units, q, context_tokens, estimate_tokens, clock.label, filler, once,
                                                 decay, also=also)[1]),
                unit_tokens=sum(estimate_tokens(u.text) for u in got.units),
                latency_ms=got.timings_ms["retrieval"],
            )
            rows[name].append(row)
    report: dict = {"questions": len(items), "retrievers": {}}
    for name, rs in rows.items():
        by_type = defaultdict(list)
        for r in rs:
            by_type[r["type"]].append(r)
        entry = summarize(rs)
        entry["by_type"] = {t: summarize(v) for t, v in sorted(by_type.items())}
        entry["by_day"] = {f"DAY{d}": summarize([r for r in rs if r["day"] == d])
                           for d in sorted({r["day"] for r in rs})}
        report["retrievers"][name] = entry
    return report


def table(report: dict) -> str:
    """The report as a plain-text table, one row per retriever and per question type."""
    cols = ["hit@0", "hit@30s", "hit@5min", *SHOWN, "units", "tokens", "unit_tokens", "latency_ms_p50",
            "latency_ms_p95"]
    lines = [f"{report['questions']} questions", f"{'retriever / type':32}" + "".join(f"{c:>16}" for c in cols)]
    for name, r in report["retrievers"].items():
        lines.append(f"{name:32}" + "".join(f"{r.get(c, ''):>16}" for c in cols))
        for t, rt in (r["by_day"] | r["by_type"]).items():
            lines.append(f"  {t:30}" + "".join(f"{rt.get(c, ''):>16}" for c in cols))
    return "\n".join(lines)


STAGES = ("shared", "planning", "retrieval", "answering")
# what the answerer is handed, measured as a retriever: the rule planner's per-agent units alone
# (EgoMAS), merged with the flat hybrid search, and as the daemon gathers them (the shared-memory
# events found first and read by the planner, as configured); no model is needed for any
PLANNED = ("planned", "planned+flat", "daemon")


class Planned:
    """The answerer's gathering as a retriever, with the rule planner (no model is loaded). Its
    units are cut to the whole context budget: the events' share is not taken off."""

    def __init__(self, name: str, store, clock: HouseClock, settings: AnswerSettings, retrievers, budget: int = 15):
        s = self.settings_for(name, settings)
        self.answerer = Answerer(store, clock, s, None, planner="rule", retrievers=retrievers, budget=budget)

    @staticmethod
    def settings_for(name: str, settings: AnswerSettings) -> AnswerSettings:
        if name == "daemon":
            return settings
        return settings.model_copy(update={"merge_flat": name == "planned+flat", "shared_top_n": 0})

    def retrieve(self, q: Query) -> Retrieved:
        g = self.answerer.gather(q)
        return Retrieved(g.units, {"retrieval": sum(g.timings_ms.values())})


def nearest_option(embed: Callable[[list[str]], np.ndarray], answer: str, options: list[str],
                   asker: str | None = None) -> tuple[str, list[float]]:
    """The letter of the option closest to a free answer (cosine of sentence vectors), and every cosine;
    an option that is the asker ("Me", "Me, Lucia") is read with the asker's name, as the answer names them."""
    v = embed([answer, *(vote.as_asker(o, asker) for o in options)])
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)
    cos = [round(float(x), 4) for x in v[1:] @ v[0]]
    return "ABCD"[int(np.argmax(cos))], cos


def languages(units: list[Unit]) -> dict[str, int]:
    """How many of the excerpts shown hold Chinese lines, English lines (a unit may hold both)."""
    zh = sum(bool(re.search(r"[\u3400-\u9fff]", u.text)) for u in units)
    en = sum(bool(re.search(r"[A-Za-z]{3}", u.text)) for u in units)
    return {"zh": zh, "en": en}


def run_answers(
    items: list[QAItem], cells: dict, clock: HouseClock, *, asker: str,
    progress: Callable[[Iterable], Iterable] = iter, open_mode: bool = False,
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> dict:
    """Every item answered by every cell (an `Answerer` with its switches): accuracy, Hit@W, cost.
    In `open_mode` the options are not given; how each answer was made is counted, and with `embed`
    the free answer counts as right when the gold option is the one nearest to it."""
    rows: dict[str, list[dict]] = defaultdict(list)
    for item in progress(items):
        q = Query(item.question, item.query_ms, () if open_mode else item.options, asker=asker)
        for name, answerer in cells.items():
            rows[name].append(_answer_row(item, answerer.answer(q), embed if open_mode else None, clock, asker))
    return {"questions": len(items), "cells": {name: _answer_entry(rs) for name, rs in rows.items()}}


def _answer_row(item: QAItem, a, embed, clock: HouseClock, asker: str | None = None) -> dict:
    units = a.gathered.units
    row = {k: hit(units, item.targets, w) for k, w in WINDOWS.items()}
    choice, cos = a.choice, None
    if embed is not None and a.answer:
        choice, cos = nearest_option(embed, a.answer, [o for o in item.options if o], asker)
    picks = (a.scores or {}).get("picks", {})
    row.update(
        {f"{k}_ok": v == item.answer for k, v in picks.items()},
        people=(a.scores or {}).get("people") and a.scores, picks=picks or None,
        option_scores=(a.scores or {}).get("cyclic"), readings=(a.scores or {}).get("evidence"),
        samples=(a.scores or {}).get("samples"),
        day=day_of(item, clock), type=item.type, id=item.id, gold=item.answer, units=len(units), tokens=a.context_tokens,
        langs=languages(units), accuracy=choice == item.answer, error=a.status != "ok",
        # what the asker reads (an open answer; a letter and its option cannot be garbage)
        degenerate=a.status == "ok" and a.choice is None and garbage(a.answer or "") is not None,
        replaced=a.mode == "extractive",
        reply_degenerate=str(a.guard).removeprefix("asked again: ").startswith(DEGENERATE_KINDS),
        choice=choice, cosines=cos,
        scoring_ms=1000 * (a.scores or {}).get("seconds", 0.0), mode=a.mode, guard=a.guard, answer=a.answer,
        reply=a.reply, prompt_tokens=a.usage.prompt_tokens, completion_tokens=a.usage.completion_tokens,
        cached_tokens=a.usage.cached_tokens, latency_ms=sum(a.timings_ms.values()),
        **{f"{s}_ms": a.timings_ms.get(s, 0.0) for s in STAGES},
    )
    return row


def _answer_entry(rs: list[dict]) -> dict:
    """One cell's figures from its rows."""
    def pct(key: str, xs=rs) -> float:
        return round(100 * float(np.mean([r[key] for r in xs])), 1)

    entry = summarize(rs)
    entry.update(accuracy=pct("accuracy"), accuracy_ci95=wilson(sum(r["accuracy"] for r in rs), len(rs)),
                 errors=int(sum(r["error"] for r in rs)), degenerate=int(sum(r["degenerate"] for r in rs)),
                 replaced=int(sum(r["replaced"] for r in rs)),
                 replies_degenerate=int(sum(r["reply_degenerate"] for r in rs)),
                 modes=dict(Counter(r["mode"] for r in rs)),
                 guards=dict(Counter(str(r["guard"]).removeprefix("asked again: ") for r in rs if r["guard"])),
                 asked_again=int(sum(str(r["guard"]).startswith("asked again") for r in rs)))
    for k in ("letter_ok", "cyclic_ok", "likelihood_ok", "pmi_ok", "evidence_ok", "voted_ok"):  # multiple choice by scoring: the readings of one pass
        if k in rs[0]:
            entry[k[:-3] + "_accuracy"] = pct(k)
    if "letter_ok" in rs[0]:
        entry["scoring_ms_p50"] = round(float(np.percentile([r["scoring_ms"] for r in rs], 50)), 1)
    entry["answers_per_hour"] = round(3_600_000 / max(1.0, float(np.mean([r["latency_ms"] for r in rs]))), 1)
    entry["excerpts_with"] = {lang: round(float(np.mean([r["langs"][lang] for r in rs])), 2) for lang in ("zh", "en")}
    entry["answers"] = [{k: r[k] for k in ("id", "day", "mode", "guard", "answer", "choice", "gold", "cosines", "picks",
                                                   "option_scores", "readings", "people", "samples")}
                        | {"model_reply": r["reply"]} for r in rs]
    for k in ("prompt_tokens", "completion_tokens", "cached_tokens"):
        entry[k] = round(float(np.mean([r[k] for r in rs])), 1)
    for q in (50, 95):
        entry[f"stage_ms_p{q}"] = {s: round(float(np.percentile([r[f"{s}_ms"] for r in rs], q)), 1) for s in STAGES}
    by_type = defaultdict(list)
    for r in rs:
        by_type[r["type"]].append(r)
    entry["by_type"] = {t: summarize(v) | {"accuracy": pct("accuracy", v)} for t, v in sorted(by_type.items())}
    return entry


def wilson(k: int, n: int, z: float = 1.96) -> list[float]:
    """The 95% Wilson interval of k successes in n, in percent."""
    if n == 0:
        return [0.0, 100.0]
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(100 * max(0.0, float(mid - half)), 1), round(100 * min(1.0, float(mid + half)), 1)]


def answer_table(report: dict) -> str:
    cols = ["accuracy", "accuracy_ci95", "degenerate", "replaced", "hit@0", "hit@30s", "hit@5min", "units", "tokens", "latency_ms_p50",
            "answers_per_hour"]
    cols += [c for c in ("letter_accuracy", "cyclic_accuracy", "likelihood_accuracy", "pmi_accuracy",
                         "evidence_accuracy", "voted_accuracy") if any(c in r for r in report["cells"].values())]
    lines = [f"{report['questions']} questions, model {report.get('model')}",
             f"{'cell':28}" + "".join(f"{c:>15}" for c in cols) + "   stage p50 ms"]
    for name, r in report["cells"].items():
        stages = " ".join(f"{k}={v}" for k, v in r["stage_ms_p50"].items())
        lines.append(f"{name:28}" + "".join(f"{r.get(c, '-')!s:>15}" for c in cols) + f"   {stages}")
    return "\n".join(lines)
