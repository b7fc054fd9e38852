"""Open "when" questions answered with the time of the evidence, told as the asker would say it.

"When was the last time we talked about coffee?" wants a time, and the time is what the memory
knows best: each excerpt has one. A 0.5B answerer rarely writes it (on EgoLifeQA DAY1-2 open mode
6 of 9 such replies were unusable). The answer is the moment of the excerpt that shares most of
the question's key words, each by its rarity (the latest of those for "the last time", the
earliest for "the first"; otherwise the retriever's best), told relative to the question's
time as people say it, with the line that bears it out: 'About four hours ago (DAY1 13:59): "Tasha: We can cook hot pot here".'
"""

from __future__ import annotations

import re
from collections.abc import Callable

from assistant.context import best_lines
from assistant.guard import GENERIC
from assistant.hybrid import CUE_TOKENS, RECENT_GAP_MS
from assistant.query import Query, question_word
from assistant.temporal import DAY, HOUR, read_intent
from memory.clock import HouseClock
from memory.records import Unit
from memory.tokenize import query_tokens

_TIME = re.compile(r"\b(?:what time|how long ago)\b", re.I)
_BEFORE = re.compile(r"\bbefore\W*$", re.I)  # "When was this discussed before?": the occasion before this one
WAY = 0.5  # excerpts holding this share of them, leading up to the question, are the occasion under way
NEAR = 0.75  # excerpts holding this share of the best one's question words (by rarity) are candidates
# the words that frame a question about an occasion ("When was X mentioned?"), not what it is about
_FRAME = frozenset(query_tokens("mention mentioned mentioning discuss discussed discussing topic talk talked"))
_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]


def asks_when(question: str) -> bool:
    """A question whose answer is a time ("When did we first ...?"), not one that only starts with
    a time ("When we go shopping, who ...?", "When I buy clothes, what ...?")."""
    word = question_word(question)
    return word == "when" or (word in ("what", "how") and bool(_TIME.search(question)))

# beyond this an answer names the day and time, not how long ago
AGO_MOST_MS = 8 * DAY


def _number(n: int) -> str:
    return _WORDS[n] if 0 <= n < len(_WORDS) else str(n)


def part_of_day(hour: int) -> str:
    return ("night" if hour < 5 else "morning" if hour < 12 else "noon" if hour < 14 else "afternoon" if hour < 18
            else "evening" if hour < 21 else "night")


def ago(ms: int, as_of: int, clock: HouseClock) -> str:
    """How long before `as_of` the moment `ms` was, as people say it: "About 50 minutes ago",
    "About four hours ago", "Last night", "Yesterday afternoon", "The day before yesterday in
    the morning", "Three days ago"."""
    d = max(0, as_of - ms)
    minutes = max(5, round(d / 300_000) * 5)
    if minutes < 60:
        return f"About {minutes} minutes ago"
    if d < 12 * HOUR:
        hours = d / HOUR
        half = " and a half" if 0.25 <= hours % 1 < 0.75 else ""
        n = int(hours) if half else max(1, round(hours))
        return "About an hour ago" if n == 1 and not half else f"About {_number(n)}{half} hours ago"
    day, _ = clock.day_of(as_of)
    then, secs = clock.day_of(ms)
    part = part_of_day(int(secs // 3600))
    if day - then == 0:
        return "Last night" if part == "night" else "Today at noon" if part == "noon" else f"This {part}"
    if day - then == 1:
        if part == "night" and secs < 5 * 3600:
            return "The night before last"
        return "Last night" if part in ("evening", "night") else f"Yesterday {'at noon' if part == 'noon' else part}"
    if day - then == 2:
        return f"The day before yesterday, in the {part}" if part != "noon" else "The day before yesterday at noon"
    return f"{_number(max(1, round(d / DAY))).capitalize()} days ago"


def key_words(question: str) -> set[str]:
    """What the question is about: its words less those that say when or how often, those that
    frame it ("mentioned", "discussed") and generic ones."""
    return set(query_tokens(question)) - CUE_TOKENS - GENERIC - _FRAME


def order_of(q: Query, clock: HouseClock) -> str | None:
    """The order the question asks for: "latest" ("the last time", "... before?"), "earliest", or another."""
    return read_intent(q.question, q.as_of_ms, clock).order or ("latest" if _BEFORE.search(q.question) else None)


def under_way(units: list[Unit], held: list[float], as_of: int) -> set[int]:
    """The ids of the excerpts of the occasion under way: those holding the question's words that
    lead up to `as_of` with no gap over `RECENT_GAP_MS` ("When was the last time cherries were
    mentioned?" is asked while they are: the answer is the occasion before)."""
    mark, out = as_of, set()
    for u, h in sorted(zip(units, held, strict=True), key=lambda p: -p[0].start_ms):
        if h > 0 and mark - u.end_ms <= RECENT_GAP_MS:
            out.add(u.id)
            mark = min(mark, u.start_ms)
    return out


def moment(units: list[Unit], q: Query, clock: HouseClock, idf: Callable[[str], float],
           translations: Callable[[str], set[str]] = lambda t: set()) -> Unit | None:
    """The excerpt whose time answers: among those holding nearly as much of the question's key
    words (each counted by its rarity, `idf`; a word held in its `translations` counts as held:
    "cherries" in 樱桃, since five of the six EgoLife wearers' captions are in Chinese alone) as
    the best, the latest before the occasion under way for "the last time", the earliest for "the
    first", else the best ranked; None when no excerpt holds any."""
    forms = {t: {t} | translations(t) for t in key_words(q.question)}
    held = [sum(idf(t) for t, f in forms.items() if f & toks) for toks in (set(query_tokens(u.text)) for u in units)]
    if not units or max(held) <= 0:
        return None
    order = order_of(q, clock)
    if order == "latest":
        now = under_way(units, [h >= WAY * max(held) for h in held], q.as_of_ms)
        before = [(u, h) for u, h in zip(units, held, strict=True) if u.id not in now and h > 0]
        if before:
            units, held = [u for u, _ in before], [h for _, h in before]
    top = [u for u, h in zip(units, held, strict=True) if h >= NEAR * max(held)]
    if order == "latest":
        return max(top, key=lambda u: u.start_ms)
    if order == "earliest":
        return min(top, key=lambda u: u.start_ms)
    return top[0]


def sentence(u: Unit, q: Query, clock: HouseClock, translations: Callable[[str], set[str]] = lambda t: set()) -> str:
    """The moment told from the question's time, with its line that holds most of the key words
    (in any of their `translations`; a Chinese line's English twin shown for it)."""
    wanted = key_words(q.question)
    line = " / ".join(best_lines(u, wanted, 1, {t: translations(t) for t in wanted})).strip().rstrip(" .;。")
    line = line if len(line) <= 140 else line[:137] + "..."
    label = clock.label(u.start_ms)[:-3]
    if q.as_of_ms - u.start_ms > AGO_MOST_MS:  # "697 days ago" says nothing: a recording asked about long after
        day, _, hm = label.partition(" ")
        return f'On {day} at {hm}: "{line}".'
    return f'{ago(u.start_ms, q.as_of_ms, clock)} ({label}): "{line}".'
