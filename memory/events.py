"""Shared-memory events (4W1H) and the 10-minute windows they are written for."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from memory.records import WINDOW_MS
from memory.store import Store


@dataclass(frozen=True)
class Event:
    """who (names), what, where, how/detail; when is the window [start_ms, end_ms)."""

    who: tuple[str, ...]
    what: str
    where: str = ""
    how: str = ""
    start_ms: int = 0
    end_ms: int = 0
    id: int = 0
    model: str = ""

    def text(self) -> str:
        parts = [", ".join(self.who) + ": " + self.what]
        if self.where:
            parts.append(f"at {self.where}")
        if self.how:
            parts.append(f"({self.how})")
        return " ".join(parts)


@dataclass(frozen=True)
class WindowObservation:
    id: int
    agent: str
    kind: str
    start_ms: int
    end_ms: int
    text: str
    speaker: str | None
    lang: str | None


class EventStore:
    """Events and window bookkeeping on top of the memory store."""

    def __init__(self, store: Store):
        self.store = store
        self.db = store.db

    def pending_windows(self, until_ms: int, start_ms: int | None = None, end_ms: int | None = None, *,
                        newest_first: bool = False, limit: int | None = None) -> list[dict]:
        """Closed windows (ending at or before `until_ms`) never consolidated or changed since."""
        return self.windows(until_ms, start_ms, end_ms, pending_only=True, newest_first=newest_first, limit=limit)

    def pending_count(self) -> int:
        """Windows never consolidated or changed since."""
        return self.db.execute(
            "SELECT COUNT(*) FROM windows WHERE consolidated_rev IS NULL OR rev > consolidated_rev").fetchone()[0]

    def windows(self, until_ms: int, start_ms: int | None = None, end_ms: int | None = None, *,
                pending_only: bool = False, newest_first: bool = False, limit: int | None = None) -> list[dict]:
        q = "SELECT start_ms, end_ms, input_hash, rev FROM windows WHERE end_ms <= ?"
        args: list = [until_ms]
        if pending_only:
            q += " AND (consolidated_rev IS NULL OR rev > consolidated_rev)"
        if start_ms is not None:
            q += " AND end_ms > ?"
            args.append(start_ms)
        if end_ms is not None:
            q += " AND start_ms < ?"
            args.append(end_ms)
        q += " ORDER BY start_ms" + (" DESC" if newest_first else "") + (f" LIMIT {int(limit)}" if limit else "")
        return [dict(r) for r in self.db.execute(q, tuple(args))]

    def observations(self, window_start: int) -> tuple[int, list[WindowObservation]]:
        """(the window's revision, its observations of all agents), read together."""
        with self.db.atomic() as c:
            rev = c.execute("SELECT rev FROM windows WHERE start_ms = ?", (window_start,)).fetchone()
            rows = c.execute(
                """SELECT o.id, a.name, o.kind, o.start_ms, o.end_ms, o.text, o.speaker, o.lang
                   FROM observations o JOIN agents a ON a.id = o.agent_id
                   WHERE o.start_ms >= ? AND o.start_ms < ? ORDER BY o.start_ms, o.id""",
                (window_start, window_start + WINDOW_MS),
            ).fetchall()
        return (rev[0] if rev else 0), [WindowObservation(*r) for r in rows]

    def mark_unchanged(self, window_start: int, rev: int) -> None:
        """The window's inputs hash as before: nothing to rebuild up to `rev`."""
        self.db.execute("UPDATE windows SET consolidated_rev = ? WHERE start_ms = ?", (rev, window_start))

    def replace(self, window_start: int, events: list[Event], *, model: str, prompt_version: str,
                input_hash: str, rev: int) -> list[int]:
        """Atomically swap the window's events for these; `rev` is the window revision they were made from.

        Data that arrived meanwhile has a newer revision, so the window stays pending.
        """
        now = _now()
        with self.db.atomic() as c:
            c.execute("DELETE FROM events WHERE window_start_ms = ?", (window_start,))
            event_rev = self.store.bump_revision(c)
            ids = []
            for e in events:
                cur = c.execute(
                    """INSERT INTO events (window_start_ms, start_ms, end_ms, who, what, place, how, model,
                       prompt_version, input_hash, created_ms, rev) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)""",
                    (window_start, window_start, window_start + WINDOW_MS, json.dumps(list(e.who), ensure_ascii=False),
                     e.what, e.where, e.how, model, prompt_version, input_hash, now, event_rev),
                )
                ids.append(cur.lastrowid)
            c.execute(
                """UPDATE windows SET state = 'consolidated', input_hash = ?, consolidated_rev = ?
                   WHERE start_ms = ?""",
                (input_hash, rev, window_start),
            )
        return ids

    def events(self, ids: list[int] | None = None, window_start: int | None = None) -> list[Event]:
        q, args = "SELECT * FROM events", ()
        if ids is not None:
            q += f" WHERE id IN ({','.join('?' * len(ids))})" if ids else " WHERE 0"
            args = tuple(ids)
        elif window_start is not None:
            q += " WHERE window_start_ms = ?"
            args = (window_start,)
        rows = self.db.execute(q + " ORDER BY start_ms, id", args).fetchall()
        return [
            Event(tuple(json.loads(r["who"])), r["what"], r["place"] or "", r["how"] or "", r["start_ms"],
                  r["end_ms"], r["id"], r["model"])
            for r in rows
        ]


def _now() -> int:
    return int(time.time() * 1000)
