"""Scoring a question's candidates, all at once with numpy (the default retriever's fusion).

A question gathers ~1,000 candidates; scoring them one by one in Python took 4.5 ms of the
retrieval's 25. The steps and their order are those of `HybridRetriever` (assistant/hybrid.py):

1. BM25 scaled so the best is 1, plus the dense weight x the cosine scaled to 0..1 over the
   candidates the dense search found;
2. the entity level (3 = every key entity and every person named, in the intended range; 2 = every
   key entity; 1 = some; 0 = none), a share of `entity_weight` per level;
3. the chain, the people present and the events above (entity memory, hierarchy);
4. context: a unit borrows a share of its better neighbour's score (same wearer, 30 s either side);
5. scales: the sum of the three best scores of its 10-minute window, then of its hour, each
   scaled so the best window is 1 (the hour's sum is taken after the window's share is added);
6. time: the intended range as a soft relevance, and a little recency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from assistant.config import SearchSettings
from assistant.temporal import HOUR, Intent
from memory.records import SEGMENT_MS, WINDOW_MS


@dataclass
class Columns:
    """One entry per candidate, in the candidates' order."""

    ids: np.ndarray
    agent: np.ndarray  # small ints, one per wearer
    start: np.ndarray
    end: np.ndarray
    lex: np.ndarray
    dense: np.ndarray
    chain: np.ndarray
    people: np.ndarray
    hier: np.ndarray
    dense2: np.ndarray | None = None  # the second encoder's cosine (`retrieval.second_encoder`), 0 where not found


def base_scores(c: Columns, s: SearchSettings) -> np.ndarray:
    lex_max = float(c.lex.max(initial=0.0)) or 1.0
    score = c.lex / lex_max
    if s.dense:
        score = score + s.dense_weight * scaled(c.dense)
        if c.dense2 is not None:
            score = score + s.second_dense_weight * scaled(c.dense2)
    return score


def scaled(sim: np.ndarray) -> np.ndarray:
    """Cosines scaled to 0..1 over the candidates a dense search found (0 where it found none)."""
    found = sim > 0
    lo, hi = (float(sim[found].min()), float(sim[found].max())) if found.any() else (0.0, 1.0)
    return np.where(found, (sim - lo) / (hi - lo), 0.0) if hi > lo else np.zeros(len(sim))


def entity_levels(c: Columns, ents: list[str], named: list[str], having: dict[str, np.ndarray],
                  in_range: np.ndarray, people_known: bool) -> np.ndarray:
    """The level of each candidate (see the module's step 2); `having`: token -> ids holding it."""
    ids = c.ids
    has = {t: _member(ids, having[t]) for t in {*ents, *named}}
    some = np.logical_or.reduce([has[t] for t in ents])
    every = np.logical_and.reduce([has[t] for t in ents])
    if people_known:
        present = c.people == 1.0
    else:
        present = np.logical_and.reduce([has[t] for t in named]) if named else np.ones(len(ids), dtype=bool)
    return np.where(every & present & in_range, 3, np.where(every, 2, np.where(some, 1, 0)))


def _member(ids: np.ndarray, of: np.ndarray) -> np.ndarray:
    """`np.isin(ids, of)` by a table of marks (no sort of `of`, which holds up to every row)."""
    if not len(of) or not len(ids):
        return np.zeros(len(ids), dtype=bool)
    top = int(max(ids.max(), of.max())) + 1
    mark = np.zeros(top, dtype=bool)
    mark[of] = True
    return mark[ids]


def relevance(intent: Intent, t: np.ndarray) -> np.ndarray:
    """`Intent.relevance` of every time in `t`."""
    d = np.zeros(len(t), dtype=np.float64)
    if intent.lo is not None:
        d = np.where(t < intent.lo, intent.lo - t, d)
    if intent.hi is not None:
        d = np.where(t > intent.hi, t - intent.hi, d)
    return np.where(d > 0, np.maximum(0.05, np.exp(-d / intent.scale)), 1.0)


def neighbours(c: Columns, score: np.ndarray) -> np.ndarray:
    """The better score of the same wearer's units 30 s before and after (0 where none is a candidate)."""
    key = c.agent.astype(np.int64) * (1 << 44) + c.start
    order = np.argsort(key, kind="stable")
    ks, vs = key[order], score[order]

    def at(k: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(ks, k, side="right") - 1
        ok = (pos >= 0) & (ks[np.maximum(pos, 0)] == k)
        return np.where(ok, vs[np.maximum(pos, 0)], 0.0)

    return np.maximum(at(key - SEGMENT_MS), at(key + SEGMENT_MS))


def pooled(start: np.ndarray, score: np.ndarray, size: int) -> np.ndarray:
    """For each candidate, the sum of the three best scores of its window of `size` ms."""
    win = start // size
    order = np.lexsort((score, win))  # by window, then score ascending
    w, v = win[order], score[order]
    last = np.searchsorted(w, w, side="right")
    keep = np.arange(len(w)) >= last - 3  # the three best of each window
    groups, inverse = np.unique(w, return_inverse=True)
    sums = np.bincount(inverse[keep], weights=v[keep], minlength=len(groups))
    return sums[np.searchsorted(groups, win)]


def score_all(c: Columns, s: SearchSettings, intent: Intent, as_of_ms: int, levels: np.ndarray | None) -> np.ndarray:
    """Steps 1 and 3 to 6 of the module (`levels`: step 2's, or None with entities off)."""
    score = base_scores(c, s)
    if levels is not None:
        score = score + s.entity_weight * levels / 3
    score = score + ((s.chain_weight * c.chain if s.entity_memory else 0.0)
                     + (s.people_weight * c.people if s.entity_memory else 0.0)
                     + (s.hierarchy_weight * c.hier if s.hierarchy else 0.0))
    if s.context:
        score = score + s.context_weight * neighbours(c, score)
    if s.scales:
        for size, weight in ((WINDOW_MS, s.window_weight), (HOUR, s.hour_weight)):
            p = pooled(c.start, score, size)
            score = score + weight * p / (float(p.max(initial=0.0)) or 1.0)
    if s.temporal:
        if intent.ranged:
            score = score * relevance(intent, c.start)
        age = np.maximum(0, as_of_ms - c.end)
        score = score * (1.0 + s.recency_weight * np.exp(-age / (s.recency_hours * HOUR)))
    return score


def fuse(lexical: list[tuple[int, float]], dense: list[tuple[int, float]], weight: float) -> list[tuple[int, float]]:
    """(id, score) best first: BM25 scaled so its best is 1, plus `weight` x cosine scaled to 0..1
    over the dense list."""
    top = max((s for _, s in lexical), default=0.0) or 1.0
    out = {i: s / top for i, s in lexical}
    if dense:
        lo, hi = min(s for _, s in dense), max(s for _, s in dense)
        for i, s in dense:
            out[i] = out.get(i, 0.0) + weight * ((s - lo) / (hi - lo) if hi > lo else 1.0)
    return sorted(out.items(), key=lambda x: -x[1])
