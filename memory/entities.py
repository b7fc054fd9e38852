"""Entity memory: the people of every segment as encounters in time, kept by store revision.

GEB's entity biographies and EGAgent's entity graph, without a model at ingest. A segment's people
are its wearer (the agent whose view it is), the speakers of its lines ("Lucia: ...") and the known
names written in its captions ("Tasha跟Lucia正在另一边"): one row per (person, segment) in
`person_encounters`, with the roles as bits. Objects need no second table: the lexical index's
postings already are their encounters (`LexicalIndex.having`), as-of aware and in time order.

Read as of a time, the encounters answer "who was there" for a set of candidate units (so a
question naming Alice finds Alice's own view, where no line says "Alice"), "when did these people
meet" (co-occurrence), and an entity's biography: its occasions, compact, as a context line.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import sqlean as sqlite3

from memory.clock import DAY_MS
from memory.lexical import LexicalIndex
from memory.records import WINDOW_MS
from memory.store import Store

logger = logging.getLogger(__name__)
WEARER, SPEAKER, MENTIONED = 1, 2, 4
_LABEL = re.compile(r"^\s*([A-Z][A-Za-z]{1,20}(?: [A-Z][A-Za-z]{1,20})?)\s*[:：]", re.M)
_NAME = re.compile(r"(?<![A-Za-z])([A-Z][a-z]{1,20})(?![a-z])")
_NOT_NAMES = frozenset("i a the ok okay yes no oh hey hi so and but what this that it".split())


def person_key(name: str) -> str:
    """The form a person is kept and asked by: 'A2_ALICE' -> 'alice', 'Lucia' -> 'lucia'."""
    return (name.rsplit("_", 1)[-1] if "_" in name else name).strip().lower()


@dataclass(frozen=True)
class Occasion:
    """Encounters of an entity within one 10-minute window: when, which units, whose views."""

    start_ms: int
    ids: tuple[int, ...]
    agents: tuple[int, ...]


def occasions(ids: Sequence[int], starts: Sequence[int], agents: Sequence[int]) -> list[Occasion]:
    """Encounters in time order grouped into occasions, one per 10-minute window, in time order."""
    out: list[Occasion] = []
    cur: list[tuple[int, int, int]] = []
    for i, s, a in zip(ids, starts, agents, strict=True):
        if cur and s // WINDOW_MS != cur[0][1] // WINDOW_MS:
            out.append(_occasion(cur))
            cur = []
        cur.append((int(i), int(s), int(a)))
    if cur:
        out.append(_occasion(cur))
    return out


def _occasion(rows: list[tuple[int, int, int]]) -> Occasion:
    return Occasion(rows[0][1], tuple(r[0] for r in rows), tuple(sorted({r[2] for r in rows})))


class EntityMemory:
    """People encounters in the store (refreshed incrementally), read as of a time."""

    def __init__(self, store: Store):
        self.store = store
        self._known: set[str] | None = None
        self._units_of: dict[str, np.ndarray] = {}  # person -> sorted segment ids (at `_units_rev`)
        self._units_rev = -1

    # -- building -----------------------------------------------------------------------
    def seen_rev(self) -> int:
        row = self.store.db.execute("SELECT value FROM revisions WHERE name = 'entities'").fetchone()
        return row[0] if row else 0

    def known(self) -> set[str]:
        """Names that count as people: the agents' and every speaker label stored so far."""
        if self._known is None:
            self._known = {person_key(a) for a in self.store.agents().values()}
            self._known |= {r[0] for r in self.store.db.execute(
                "SELECT DISTINCT person FROM person_encounters WHERE role & ? != 0", (SPEAKER,))}
        return self._known

    def refresh(self, batch: int = 2000) -> int:
        """Reads the segments changed since the last refresh; returns how many. A store that cannot
        be written (read-only, locked past its timeout, a full disk) keeps the encounters it has:
        logged, 0 returned, the next refresh tries again."""
        try:
            return self._refresh(batch)
        except sqlite3.OperationalError as e:
            logger.warning("entity memory not refreshed (%s); using what it holds", e)
            return 0

    def _refresh(self, batch: int) -> int:
        db, seen, top = self.store.db, self.seen_rev(), self.store.revision()
        if top == seen:
            return 0
        agents = {i: person_key(a) for i, a in self.store.agents().items()}
        rows = db.execute("SELECT id, agent_id, start_ms, last_ms, text FROM segments WHERE rev > ? AND rev <= ?",
                          (seen, top)).fetchall()
        known = self.known()
        known.update(agents.values())
        for r in rows:  # speaker labels first, so a name spoken anywhere in the batch is known
            known.update(person_key(m) for m in _LABEL.findall(r[4]) if person_key(m) not in _NOT_NAMES)
        for i in range(0, len(rows), batch):
            chunk = rows[i:i + batch]
            found = [(p, r[0], r[1], r[2], r[3], role) for r in chunk
                     for p, role in people_of(r[4], agents.get(r[1], ""), known).items()]
            with db.atomic() as c:
                c.executemany("DELETE FROM person_encounters WHERE segment_id = ?", [(r[0],) for r in chunk])
                c.executemany("INSERT INTO person_encounters (person, segment_id, agent_id, start_ms, asof_ms, role) "
                              "VALUES (?, ?, ?, ?, ?, ?)", found)
        with db.atomic() as c:
            c.execute("INSERT INTO revisions (name, value) VALUES ('entities', ?) "
                      "ON CONFLICT(name) DO UPDATE SET value = excluded.value", (top,))
        if rows:
            logger.info("entity memory: %d segment(s) read", len(rows))
        return len(rows)

    # -- reading ------------------------------------------------------------------------
    def present(self, ids: Iterable[int]) -> dict[int, set[str]]:
        """The people of each unit (wearer, speakers, names in its captions)."""
        out: dict[int, set[str]] = {}
        ids = list(ids)
        for k in range(0, len(ids), 500):
            chunk = ids[k:k + 500]
            for person, sid in self.store.db.execute(
                    f"SELECT person, segment_id FROM person_encounters WHERE segment_id IN "
                    f"({','.join('?' * len(chunk))})", chunk):
                out.setdefault(sid, set()).add(person)
        return out

    def units_of(self, person: str) -> np.ndarray:
        """Sorted ids of the units where `person` is present, kept in memory (a lookup of every
        candidate then costs microseconds instead of an `IN (...)` query of ~1,000 ids). When the
        entity memory has read new segments since, only theirs are read and added (a live house
        moves the revision with every batch of captions); a revision that went back clears all."""
        rev = self.seen_rev()
        if rev < self._units_rev:
            self._units_of = {}
        elif rev > self._units_rev and self._units_of:
            for p, have in self._units_of.items():
                rows = self.store.db.execute(
                    "SELECT DISTINCT e.segment_id FROM person_encounters e JOIN segments s ON s.id = e.segment_id "
                    "WHERE e.person = ? AND s.rev > ?", (p, self._units_rev))
                self._units_of[p] = np.union1d(have, np.fromiter((r[0] for r in rows), dtype=np.int64))
        self._units_rev = rev
        if person not in self._units_of:
            rows = self.store.db.execute("SELECT DISTINCT segment_id FROM person_encounters WHERE person = ?",
                                         (person,))
            self._units_of[person] = np.sort(np.fromiter((r[0] for r in rows), dtype=np.int64))
        return self._units_of[person]

    def present_of(self, ids: Sequence[int], people: Iterable[str]) -> dict[int, set[str]]:
        """Which of `people` are present in each unit of `ids` (as `present`, for a few people)."""
        arr = np.asarray(ids, dtype=np.int64)
        out: dict[int, set[str]] = {}
        for person in people:
            have = self.units_of(person)
            pos = np.searchsorted(have, arr)
            hit = (pos < len(have)) & (have[np.minimum(pos, len(have) - 1)] == arr) if len(have) else arr < 0
            for i in arr[hit].tolist():
                out.setdefault(i, set()).add(person)
        return out

    def with_people(self, people: Sequence[str], *, as_of: int | None = None, limit: int = 400) -> list[int]:
        """Units where every one of `people` is present, latest first, recorded by `as_of`."""
        people = list(dict.fromkeys(person_key(p) for p in people))
        if not people:
            return []
        marks = ",".join("?" * len(people))
        args: list = [*people]
        where = f"person IN ({marks})"
        if as_of is not None:
            where += " AND asof_ms <= ?"
            args.append(as_of)
        rows = self.store.db.execute(
            f"SELECT segment_id FROM person_encounters WHERE {where} GROUP BY segment_id "
            f"HAVING COUNT(DISTINCT person) = ? ORDER BY MAX(start_ms) DESC LIMIT ?", (*args, len(people), limit))
        return [r[0] for r in rows]


def object_encounters(index: LexicalIndex, tokens: Iterable[str | Sequence[str]], *, as_of: int | None = None,
                      agents: Iterable[int] | None = None, every: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, start times, agent ids) of the rows holding every token (or, with `every=False`,
    any of them), recorded by `as_of`, in time order: the encounters of an entity, read from the
    index's own postings. A token may be a group of alternatives (a word and its translations:
    "screwdriv" or 丝刀), held when any of them is."""
    groups = [g for g in dict.fromkeys((t,) if isinstance(t, str) else tuple(dict.fromkeys(t)) for t in tokens)
              if g and all(g)]
    agent_arr = np.array(sorted(set(agents)), dtype=np.int32) if agents is not None else None
    parts = []
    for key in sorted(index.shards):
        shard = index.shards[key]
        if not groups or (as_of is not None and key * DAY_MS > as_of):
            continue
        count = np.zeros(shard.n, dtype=np.int16)
        for g in groups:
            held = np.zeros(shard.n, dtype=bool)
            for t in g:
                col = shard.column(t)
                if col is not None:
                    held[col[0]] = True
            count += held
        mask = count >= (len(groups) if every else 1)
        if as_of is not None:
            mask &= shard.asof <= as_of
        if agent_arr is not None:
            mask &= np.isin(shard.agents, agent_arr)
        idx = np.flatnonzero(mask)
        parts.append((shard.ids[idx], shard.starts[idx], shard.agents[idx]))
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
    ids, starts, ags = (np.concatenate(x) for x in zip(*parts, strict=True))
    order = np.argsort(starts, kind="stable")
    return ids[order], starts[order], ags[order]


def people_of(text: str, wearer: str, known: set[str]) -> dict[str, int]:
    """person -> roles (bits) in one segment's text."""
    out: dict[str, int] = {}
    if wearer:
        out[wearer] = WEARER
    for m in _LABEL.findall(text):
        p = person_key(m)
        if p not in _NOT_NAMES:
            out[p] = out.get(p, 0) | SPEAKER
    for m in _NAME.findall(_LABEL.sub("", text)):
        p = m.lower()
        if p in known:
            out[p] = out.get(p, 0) | MENTIONED
    return out


def biography(name: str, occ: list[Occasion], agents: dict[int, str], label, *, limit: int = 8) -> str:
    """One compact line of an entity's occasions: 'screwdriver: DAY1 11:10 (Alice, Jake); ...'."""
    if not occ:
        return ""
    shown = occ if len(occ) <= limit else occ[: limit // 2] + occ[-(limit - limit // 2):]
    parts = [f"{label(o.start_ms)[:-3]} ({', '.join(agents.get(a, str(a)) for a in o.agents)})" for o in shown]
    more = f" [{len(occ) - len(shown)} more]" if len(occ) > len(shown) else ""
    return f"{name}: seen on {len(occ)} occasion(s): " + "; ".join(parts) + more
