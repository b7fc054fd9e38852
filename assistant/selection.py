"""How the default retriever spends its budget besides best first: the end of it on other moments,
and candidates taken one per day for habits (`assistant.hybrid`'s selection); a candidate and its
scores."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from memory.clock import HouseClock
from memory.records import Unit


@dataclass
class Cand:
    unit: Unit
    lex: float = 0.0
    dense: float = 0.0
    score: float = 0.0
    level: int = 0
    chain: float = 0.0
    hier: float = 0.0
    people: float = 0.0
    dense2: float = 0.0
    first: int = 0  # 1, 2, ...: the object's first (or last) encounters in the order asked (0: not one)


def new_moments(ranked: list[Cand], room: int, apart_ms: float, taken: list[Cand]) -> list[Cand]:
    """Up to `room` candidates best first, each at least `apart_ms` from every one taken before it:
    the end of the budget reaches other moments instead of more of the best one (a miss's nearest
    unit is mostly minutes off the target)."""
    starts, out = [c.unit.start_ms for c in taken], []
    for c in ranked:
        if len(out) >= room:
            break
        t = c.unit.start_ms
        if all(abs(t - s) >= apart_ms for s in starts):
            starts.append(t)
            out.append(c)
    return out


def round_robin_by_day(cands: list[Cand], clock: HouseClock) -> list[Cand]:
    days: dict[int, list[Cand]] = defaultdict(list)
    for c in cands:
        days[clock.day_of(c.unit.start_ms)[0]].append(c)
    out, rank = [], 0
    while len(out) < len(cands):
        for d in sorted(days):
            if rank < len(days[d]):
                out.append(days[d][rank])
        rank += 1
    return out
