"""The numpy scoring of candidates (assistant/fusion.py) against the step-by-step rules it replaced."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from assistant.config import SearchSettings
from assistant.fusion import Columns, entity_levels, neighbours, pooled, relevance, score_all
from assistant.temporal import HOUR, Intent
from memory.records import SEGMENT_MS, WINDOW_MS

T0 = 1_700_000_000_000


def columns(n: int, seed: int, *, duplicates: bool = False) -> Columns:
    rng = np.random.default_rng(seed)
    slot = rng.choice(400, n, replace=duplicates)  # 30-second slots over ~3 hours
    start = T0 + slot.astype(np.int64) * SEGMENT_MS
    agent = rng.integers(0, 3, n)
    dense = np.where(rng.random(n) < 0.5, rng.random(n), 0.0)
    return Columns(np.arange(n, dtype=np.int64) + 10, agent, start, start + SEGMENT_MS, rng.random(n) * 8,
                   dense, np.where(rng.random(n) < 0.2, 1.0, 0.0), rng.choice([0.0, 0.5, 1.0], n),
                   np.where(rng.random(n) < 0.1, 0.5, 0.0))


def reference(c: Columns, s: SearchSettings, intent: Intent, as_of: int, levels) -> list[float]:
    """The loops the retriever ran before (assistant/hybrid.py up to commit 44c4767)."""
    n = len(c.ids)
    lex_max = max(c.lex.tolist(), default=0.0) or 1.0
    sims = [d for d in c.dense.tolist() if d > 0]
    lo, hi = (min(sims), max(sims)) if sims else (0.0, 1.0)
    score = []
    for k in range(n):
        d = (c.dense[k] - lo) / (hi - lo) if c.dense[k] > 0 and hi > lo else 0.0
        score.append(float(c.lex[k] / lex_max + (s.dense_weight * d if s.dense else 0.0)))
    if levels is not None:
        score = [v + s.entity_weight * int(lv) / 3 for v, lv in zip(score, levels, strict=True)]
    score = [v + (s.chain_weight * c.chain[k] + s.people_weight * c.people[k] + s.hierarchy_weight * c.hier[k])
             for k, v in enumerate(score)]
    by_slot = {(int(c.agent[k]), int(c.start[k])): score[k] for k in range(n)}
    score = [v + s.context_weight * max(by_slot.get((int(c.agent[k]), int(c.start[k]) - SEGMENT_MS), 0.0),
                                        by_slot.get((int(c.agent[k]), int(c.start[k]) + SEGMENT_MS), 0.0))
             for k, v in enumerate(score)]
    for size, weight in ((WINDOW_MS, s.window_weight), (HOUR, s.hour_weight)):
        per: dict[int, list[float]] = defaultdict(list)
        for k in range(n):
            per[int(c.start[k]) // size].append(score[k])
        sums = {w: float(np.sum(sorted(v)[-3:])) for w, v in per.items()}
        top = max(sums.values(), default=0.0) or 1.0
        score = [v + weight * sums[int(c.start[k]) // size] / top for k, v in enumerate(score)]
    out = []
    for k, v in enumerate(score):
        v *= intent.relevance(int(c.start[k])) if intent.ranged else 1.0
        age = max(0, as_of - int(c.end[k]))
        out.append(v * (1.0 + s.recency_weight * math.exp(-age / (s.recency_hours * HOUR))))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_scores_are_those_of_the_rules_step_by_step(seed):
    c = columns(300, seed, duplicates=seed % 2 == 1)
    s = SearchSettings(recency_weight=0.3)
    intent = Intent(lo=T0 + 3600_000, hi=T0 + 5400_000, scale=2 * HOUR) if seed % 3 else Intent()
    levels = np.random.default_rng(seed).integers(0, 4, 300) if seed % 2 == 0 else None
    got = score_all(c, s, intent, int(c.end.max()) + 60_000, levels)
    assert np.allclose(got, reference(c, s, intent, int(c.end.max()) + 60_000, levels), rtol=1e-12, atol=1e-12)


def test_context_borrows_only_the_same_wearers_neighbour():
    c = Columns(np.array([1, 2, 3, 4]), np.array([0, 0, 1, 0]), np.array([0, 30_000, 60_000, 90_000]) + T0,
                np.array([30_000, 60_000, 90_000, 120_000]) + T0, *(np.zeros(4) for _ in range(5)))
    near = neighbours(c, np.array([5.0, 1.0, 9.0, 2.0]))
    # unit 2's neighbours are 1 (5.0) and the other wearer's unit at +30 s (not counted); 4 has none
    assert near.tolist() == [1.0, 5.0, 0.0, 0.0]


def test_a_window_counts_its_three_best():
    start = np.array([0, 1, 2, 3, WINDOW_MS + 5], dtype=np.int64)
    assert pooled(start, np.array([1.0, 4.0, 2.0, 8.0, 3.0]), WINDOW_MS).tolist() == [14.0] * 4 + [3.0]


def test_relevance_is_intents_own():
    intent = Intent(lo=T0, hi=T0 + HOUR, scale=HOUR)
    t = np.array([T0 - 10 * HOUR, T0 - HOUR, T0, T0 + HOUR // 2, T0 + 2 * HOUR])
    assert np.allclose(relevance(intent, t), [intent.relevance(int(x)) for x in t])


def test_entity_levels_strict_to_loose():
    c = columns(5, 0)
    c.people[:] = [1.0, 1.0, 0.5, 1.0, 0.0]
    having = {"cake": np.array([10, 11, 12, 13]), "plate": np.array([10, 11, 12]), "tasha": np.array([10])}
    in_range = np.array([True, False, True, True, True])
    got = entity_levels(c, ["cake", "plate"], ["tasha"], having, in_range, people_known=True)
    # 10: all, present, in range; 11: out of range; 12: not everyone present; 13: cake only; 14: none
    assert got.tolist() == [3, 2, 2, 1, 0]
