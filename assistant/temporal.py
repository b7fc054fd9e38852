"""The temporal intent of a question, read relative to its `as_of` time (EgoCITE's time-aware retrieval).

A question names a range ("on DAY3", "yesterday", "this morning", "at noon", "just now", "two
hours ago") and/or an order ("the last time", "the first", "usually"). The range becomes a soft
relevance that decays outside it rather than a hard cut, because people misplace times; the order
becomes a curation rule for the candidates: latest first, earliest first, or spread over days.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from memory.clock import HouseClock

HOUR = 3_600_000
DAY = 24 * HOUR
_NUM = {"one": 1, "a": 1, "an": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
        "half": 0.5, "several": 3, "few": 3, "couple": 2}
# parts of a day in house-local hours
PARTS = {"morning": (5, 12), "noon": (11, 14), "afternoon": (12, 18), "evening": (17, 24), "night": (18, 24),
          "tonight": (18, 24), "lunch": (11, 14), "breakfast": (6, 11), "dinner": (17, 22)}

_LATEST = re.compile(r"\b(last time|the last|most recent(ly)?|latest|previous(ly)?|again|before that|"
                     r"last (one|person|thing))\b", re.I)
# "the first floor", "on the first day": a place and a day, not an order
_EARLIEST = re.compile(r"\b(first(?!\s+(?:floor|day)\b)|initially|originally|at the beginning|at first|in the beginning|earliest|"
                       r"started?|beginning)\b", re.I)
_HABIT = re.compile(r"\b(usually|always|often|normally|typically|most( often)?|every ?(time|day)|habit(ually)?|"
                    r"tend to|frequently|the most|mostly)\b", re.I)
_RECENT = re.compile(r"\b(just now|just|now|currently|right now|a moment ago|moments? ago|earlier today|"
                     r"recently|at the moment|this time)\b", re.I)
_AGO = re.compile(r"\b(\d+|one|a|an|two|three|four|five|six|seven|eight|half|several|few|couple)\s+(of\s+)?"
                  r"(hours?|minutes?|days?)\s+ago\b", re.I)
_DAY = re.compile(r"\bday\s*(\d+)\b", re.I)
_PART = re.compile(r"\b(this|that|yesterday|today'?s?|in the)?\s*(morning|noon|afternoon|evening|night|tonight|"
                   r"lunch|breakfast|dinner)\b", re.I)
# "for dinner", "dinner plans": a meal ahead, not a time the question is about
_AHEAD = re.compile(r"\b(for|next|tomorrow'?s?)\s+(the\s+)?$", re.I)
# "last night", "the night before last": the night(s) before as_of's day, in days back
_NIGHTS = ((re.compile(r"\bthe night before last\b", re.I), 2), (re.compile(r"\blast night\b", re.I), 1))


# words that say when or how often, not what: never a question's key entity
CUE_WORDS = frozenset("""first last previous previously originally initially earliest latest beginning begin start
    started usually always often normally typically frequently mostly habit habitually every time times again before
    after ago just now currently recently moment moments today yesterday tomorrow tonight morning noon afternoon
    evening night day days hour hours minute minutes week earlier later especially among compared
    couldn't wouldn't shouldn't hasn't haven't isn't aren't wasn't weren't don't didn't doesn't can't won't""".split())


@dataclass(frozen=True)
class Intent:
    """lo..hi: the intended range (ms, either may be None); order: latest / earliest / spread / None;
    scale: how fast relevance decays outside the range (ms)."""

    lo: int | None = None
    hi: int | None = None
    order: str | None = None
    scale: int = 6 * HOUR
    cues: tuple[str, ...] = ()

    @property
    def ranged(self) -> bool:
        return self.lo is not None or self.hi is not None

    def relevance(self, t: int) -> float:
        """1 inside the range; exp(-distance / scale) outside it, never below 0.05."""
        if self.lo is not None and t < self.lo:
            d = self.lo - t
        elif self.hi is not None and t > self.hi:
            d = t - self.hi
        else:
            return 1.0
        return max(0.05, math.exp(-d / self.scale))


def read_intent(question: str, as_of: int, clock: HouseClock) -> Intent:
    q = question
    day, secs = clock.day_of(as_of)
    midnight = clock.at(day, 0)
    lo = hi = None
    cues: list[str] = []
    scale = 6 * HOUR
    m = _DAY.search(q)
    if m:
        d = int(m.group(1))
        lo, hi, scale = clock.at(d, 0), clock.at(d + 1, 0), 3 * HOUR
        cues.append(f"day{d}")
    elif re.search(r"\byesterday\b", q, re.I):
        lo, hi, scale = midnight - DAY, midnight, 3 * HOUR
        cues.append("yesterday")
    elif re.search(r"\btoday\b|\bthis (morning|afternoon|evening)\b|\btonight\b", q, re.I):
        lo, hi, scale = midnight, as_of, 3 * HOUR
        cues.append("today")
    order = _order(q)
    part = _PART.search(q)
    night = next((back for rx, back in _NIGHTS if rx.search(q)), 0)
    if night and lo is None:  # the night from 18:00 to 05:00, `night` days back
        lo, hi, scale = midnight - night * DAY + 18 * HOUR, midnight - (night - 1) * DAY + 5 * HOUR, HOUR
        cues.append("night")
    elif part and part.group(2).lower() in PARTS:
        a, b = PARTS[part.group(2).lower()]
        base = lo if lo is not None else midnight
        if part.group(1) and part.group(1).lower() == "yesterday":
            base = midnight - DAY
        if lo is not None or (part.group(1) or "").lower() in ("this", "today", "todays", "today's", "yesterday"):
            lo, hi, scale = base + a * HOUR, base + b * HOUR, HOUR
            cues.append(part.group(2).lower())
        elif order is None and not _AHEAD.search(q[:part.start(2)]):
            # a bare part ("at noon", "in the afternoon", "during lunch"): the latest one begun at
            # least an hour before as_of (today's, or yesterday's when today's has hardly begun)
            start = midnight + a * HOUR
            if as_of - start < HOUR:
                start -= DAY
            lo, hi, scale = start, start + (b - a) * HOUR, HOUR
            cues.append(part.group(2).lower())
    ago = _AGO.search(q)
    if ago and lo is None:
        n = float(_NUM.get(ago.group(1).lower(), 0) or ago.group(1))
        unit = {"h": HOUR, "m": 60_000, "d": DAY}[ago.group(3)[0].lower()]
        center = as_of - int(n * unit)
        lo, hi, scale = center - int(0.5 * unit), center + int(0.5 * unit), unit
        cues.append("ago")
    if order:
        cues.append(order)
    if lo is None and _RECENT.search(q) and order is None:
        lo, hi, scale = as_of - HOUR, as_of, 2 * HOUR
        cues.append("recent")
    return Intent(lo, min(hi, as_of) if hi is not None else None, order, scale, tuple(cues))


def _order(q: str) -> str | None:
    """latest / earliest / spread (a habit), or None."""
    if _HABIT.search(q):
        return "spread"
    if _EARLIEST.search(q):
        return "earliest"
    if _LATEST.search(q):
        return "latest"
    return None
