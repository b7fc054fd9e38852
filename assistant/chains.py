"""Ways into the fine units besides the best-matching moment: an entity's chain of occasions, the
people present, and the shared-memory events above the units (the hybrid retriever's `entity_memory`
and `hierarchy` parts).

- Chain (GEB, EGAgent): the units holding every key object of the question (else its rarest one),
  an object held by its word or by a translation the memory's glossary is sure of (screwdriver or
  丝刀: the untranslated captions of five wearers are on the chain too), grouped into occasions
  (10-minute windows) and taken in the order the question asks: the latest occasions before the
  one under way for "last time" and "where is", the earliest for "first", one per day for habits.
  Each occasion's units score by its rank (1, 1/2, 1/3, ...).
- First encounters: the units holding the rarest key object alone (in any language), the earliest
  for "first", the latest before the occasion under way for "last time"; the retriever hands over
  the first `retrieval.chain_slots` of them whatever their score.
- People: the share of the people a question names who are present in a unit, as wearer, speaker
  or named in its captions (`memory.entities`): Alice's own view counts for "Alice".
- Hierarchy: the events that match the question lead to the best-matching units inside their
  window, scored by the event's rank.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from assistant.context import speaker_of
from assistant.query import Query
from assistant.temporal import Intent
from memory.entities import EntityMemory, Occasion, object_encounters, occasions
from memory.events import EventStore
from memory.lexical import LexicalIndex
from memory.records import Unit
from memory.tokenize import tokenize

OCCASIONS = 4  # occasions of a chain taken
PER_OCCASION = 12  # units of one occasion taken (a chain through a busy hour would flood the pool)
RECENT_GAP_MS = 10 * 60_000
_WHERE = re.compile(r"\b(where (is|was|are|were|did|do)|put (it|them)|placed?|left)\b", re.I)
# a question about what was said, asked or sung: its occasions are in the talk, not in what was seen
_SPOKEN = re.compile(r"\b(talk\w*|discuss\w*|chat\w*|says?|said|mention\w*|told|tell\w*|ask\w*|suggest\w*|topic|"
                     r"conversation|speak\w*|spoke|sing\w*|sang|songs?|joke\w*|call(ed|s)?|explain\w*|remind\w*|"
                     r"propos\w*|heard|hear|words?)\b", re.I)
SEEN_SCAN = 120  # the latest encounters read for a line that shows the object (not one that names it in talk)
Seen = Callable[[np.ndarray], np.ndarray]  # ids -> whether a caption line of the unit holds the object


def asks_spoken(question: str) -> bool:
    return _SPOKEN.search(question) is not None


def chain_order(question: str, intent: Intent) -> str | None:
    """The order the question asks of an entity's occasions: latest, earliest, spread or None."""
    if intent.order:
        return intent.order
    return "latest" if _WHERE.search(question) else None


def chain_scores(index: LexicalIndex, entities: Sequence[str | Sequence[str]], q: Query, order: str | None, agents,
                 day_of, seen: Seen | None = None) -> dict[int, float]:
    """id -> the rank score of its occasion on the entity chain (empty with no order or entity).
    `seen` (for "the last time" a thing was done): the latest encounters where the object is seen,
    before those where it is only named in talk."""
    if not order or not entities:
        return {}
    ids, starts, ags = object_encounters(index, entities, as_of=q.as_of_ms, agents=agents)
    if not len(ids) and len(entities) > 1:
        ids, starts, ags = object_encounters(index, entities[:1], as_of=q.as_of_ms, agents=agents)
    if order == "latest":
        ids, starts, ags = seen_latest(seen, ids, starts, ags)
    occ = occasions(ids, starts, ags)
    if order == "latest":
        occ = [o for o in occ if o.start_ms < q.as_of_ms - RECENT_GAP_MS] or occ
        occ.reverse()
    elif order == "spread":
        occ = _one_per_day(occ, day_of)
    out: dict[int, float] = {}
    for rank, o in enumerate(occ[:OCCASIONS]):
        for i in o.ids[:PER_OCCASION]:
            out.setdefault(i, 1.0 / (1 + rank))
    return out


def seen_latest(seen: Seen | None, ids: np.ndarray, *cols: np.ndarray) -> tuple[np.ndarray, ...]:
    """The latest `SEEN_SCAN` encounters (time order) where the object is seen, when there are any."""
    if seen is None or not len(ids):
        return (ids, *cols)
    tail = slice(max(0, len(ids) - SEEN_SCAN), None)
    keep = seen(ids[tail])
    if not keep.any():
        return (ids, *cols)
    return tuple(a[tail][keep] for a in (ids, *cols))


def seen_reader(units_of: Callable[[list[int]], dict[int, Unit]], groups: Sequence[Sequence[str]],
                question: str) -> Seen | None:
    """Whether a unit shows the question's objects in a caption line (not only in a line of talk: "If
    you watch my movie" is not watching one), for "the last time" a thing was done; `units_of` reads
    units' texts. Each unit is read once a question (the chain and the first encounters ask alike)."""
    if not groups or asks_spoken(question):
        return None
    words, known = {t for g in groups for t in g}, {}
    # a stem less its last letter is in the line's text where the word is ("happi": "happy")
    stubs = tuple(w[:-1] if len(w) > 3 and w.isascii() else w for w in words)

    def shows(line: str) -> bool:
        low = line.lower()
        return any(s in low for s in stubs) and not speaker_of(line) and not words.isdisjoint(tokenize(line))

    def seen(ids: np.ndarray) -> np.ndarray:
        new = [i for i in ids.tolist() if i not in known]
        units = units_of(new) if new else {}
        for i in new:
            known[i] = i in units and any(shows(line) for line in units[i].text.splitlines())
        return np.array([known[i] for i in ids.tolist()], dtype=bool)
    return seen


def first_encounters(index: LexicalIndex, entity: Sequence[str], q: Query, order: str | None, agents,
                     n: int, seen: Seen | None = None) -> list[int]:
    """The `n` earliest units holding the object (`order` "earliest"), or the `n` latest before
    the occasion under way ("latest"): the object's own encounters, whatever else the question
    says ("used" in "who used the screwdriver first" need not be on the line)."""
    if order not in ("earliest", "latest") or not entity or n <= 0:
        return []
    ids, starts, _ = object_encounters(index, [entity], as_of=q.as_of_ms, agents=agents)
    if order == "earliest":
        return [int(i) for i in ids[:n]]
    ids, starts = seen_latest(seen, ids, starts)
    before = ids[starts < q.as_of_ms - RECENT_GAP_MS]
    return [int(i) for i in (before if len(before) else ids)[::-1][:n]]


def _one_per_day(occ: list[Occasion], day_of) -> list[Occasion]:
    seen, first, rest = set(), [], []
    for o in occ:
        d = day_of(o.start_ms)
        (rest if d in seen else first).append(o)
        seen.add(d)
    return first + rest


def presence(entities: EntityMemory, ids: Sequence[int], named: set[str]) -> dict[int, float]:
    """id -> share of the named people present in the unit."""
    if not named:
        return {}
    found = entities.present_of(ids, named)
    return {i: len(named & found.get(i, set())) / len(named) for i in ids}


def hierarchy_scores(index: LexicalIndex, event_index: LexicalIndex, events: EventStore,
                     weights: dict[str, float], q: Query, agents, *, k_events: int = 5,
                     k_units: int = 6) -> dict[int, float]:
    """id -> the rank score of the best event whose window holds it (1, 1/2, ...)."""
    event_index.refresh()
    hits = event_index.search(weights, k=k_events, as_of=q.as_of_ms)
    if not hits:
        return {}
    found = {e.id: e for e in events.events([i for i, _ in hits])}
    out: dict[int, float] = {}
    for rank, (eid, _) in enumerate(hits):
        e = found.get(eid)
        if e is None:
            continue
        for i, _ in index.search(weights, k=k_units, as_of=q.as_of_ms, agents=agents, start_ms=e.start_ms,
                                 end_ms=max(e.end_ms, e.start_ms + 1)):
            out.setdefault(i, 1.0 / (1 + rank))
    return out
