"""The store: agents, observations (idempotent), segments derived from them, window bookkeeping."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlean as sqlite3

from memory.db import Database, is_full
from memory.errors import StorageFull
from memory.records import SEGMENT_MS, WINDOW_MS, Observation, Unit, segment_start, window_start
from memory.schema import MIGRATIONS

logger = logging.getLogger(__name__)


@dataclass
class AddResult:
    inserted: int = 0
    duplicates: int = 0
    segments: int = 0

    def __iadd__(self, other: AddResult) -> AddResult:
        self.inserted += other.inserted
        self.duplicates += other.duplicates
        self.segments += other.segments
        return self


class Store:
    """One SQLite file of memory. One writer: the process that opened it read-write."""

    def __init__(self, path: str | Path, *, readonly: bool = False, reserve_mb: float = 0):
        self.path = str(path)
        self.reserve_bytes = int(reserve_mb * 1_048_576)
        self._capped = False
        self.db = Database(path, MIGRATIONS, readonly=readonly)
        self._agent_ids: dict[str, int] = {}

    def close(self) -> None:
        self.db.close()

    # -- agents -------------------------------------------------------------------------
    def agent_id(self, name: str) -> int:
        if name not in self._agent_ids:
            row = self.db.execute("SELECT id FROM agents WHERE name = ?", (name,)).fetchone()
            if row is None:
                with self.db.atomic() as c:
                    cur = c.execute(
                        "INSERT INTO agents (name, created_ms) VALUES (?, ?)", (name, _now())
                    )
                self._agent_ids[name] = cur.lastrowid
            else:
                self._agent_ids[name] = row[0]
        return self._agent_ids[name]

    def agents(self) -> dict[int, str]:
        return {r[0]: r[1] for r in self.db.execute("SELECT id, name FROM agents ORDER BY name")}

    # -- observations -------------------------------------------------------------------
    def add(self, observations: Iterable[Observation]) -> AddResult:
        """Store observations; one already stored (same agent and key) is skipped.

        All or nothing: the observations, their segments and windows commit together. A full disk
        (or free space below the reserve) raises StorageFull with nothing written.
        """
        try:
            return self._add(observations)
        except (sqlite3.OperationalError, OSError) as e:
            if is_full(e):
                raise StorageFull(f"{self.path}: {e}") from e
            raise

    def _add(self, observations: Iterable[Observation]) -> AddResult:
        if (self.reserve_bytes or self._capped) and self.path != ":memory:":
            self.db.cap_growth(self.reserve_bytes)  # free space changes: measured before every write
            self._capped = True
        result = AddResult()
        touched: set[tuple[int, int]] = set()
        windows: set[int] = set()
        now = _now()
        rows = []
        for ob in observations:
            ob.check()
            rows.append((self.agent_id(ob.agent), ob))
        with self.db.atomic() as c:
            for aid, ob in rows:
                cur = c.execute(
                    """INSERT OR IGNORE INTO observations
                       (agent_id, kind, start_ms, end_ms, text, speaker, lang, ext_id, recorded_ms)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                    (aid, ob.kind, ob.start_ms, ob.end_ms, ob.text, ob.speaker, ob.lang, ob.key(), now),
                )
                if cur.rowcount:
                    result.inserted += 1
                    touched.add((aid, segment_start(ob.start_ms)))
                    windows.add(window_start(ob.start_ms))
                else:
                    result.duplicates += 1
            if touched:
                rev = self._bump_rev(c)
                for aid, start in sorted(touched):
                    self._build_segment(c, aid, start, rev)
                c.executemany(
                    """INSERT INTO windows (start_ms, end_ms, updated_ms, rev) VALUES (?, ?, ?, ?)
                       ON CONFLICT (start_ms) DO UPDATE SET updated_ms = excluded.updated_ms, rev = excluded.rev""",
                    [(w, w + WINDOW_MS, now, rev) for w in sorted(windows)],
                )
        result.segments = len(touched)
        return result

    def _bump_rev(self, c) -> int:
        c.execute("UPDATE revisions SET value = value + 1 WHERE name = 'memory'")
        return c.execute("SELECT value FROM revisions WHERE name = 'memory'").fetchone()[0]

    def _build_segment(self, c, agent_id: int, start: int, rev: int) -> None:
        obs = c.execute(
            """SELECT id, kind, end_ms, text, speaker FROM observations
               WHERE agent_id = ? AND start_ms >= ? AND start_ms < ? ORDER BY start_ms, id""",
            (agent_id, start, start + SEGMENT_MS),
        ).fetchall()
        lines: list[str] = []
        for r in obs:
            line = f"{r['speaker']}: {r['text']}" if r["kind"] == "transcript" and r["speaker"] else r["text"]
            if line not in lines:  # captions repeat ("I keep looking at everyone"): say it once
                lines.append(line)
        c.execute(
            """INSERT INTO segments (agent_id, start_ms, end_ms, text, obs_ids, rev, last_ms)
               VALUES (?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT (agent_id, start_ms) DO UPDATE SET
                 text = excluded.text, obs_ids = excluded.obs_ids, rev = excluded.rev,
                 last_ms = excluded.last_ms""",
            (
                agent_id, start, start + SEGMENT_MS, "\n".join(lines),
                ",".join(str(r["id"]) for r in obs), rev, max(r["end_ms"] for r in obs),
            ),
        )

    def rebuild_segments(self) -> int:
        """Derive every segment again from the observations (they are the truth)."""
        with self.db.atomic() as c:
            c.execute("DELETE FROM segments")
            rev = self._bump_rev(c)
            keys = c.execute(
                f"SELECT DISTINCT agent_id, start_ms - start_ms % {SEGMENT_MS} FROM observations"
            ).fetchall()
            for aid, start in keys:
                self._build_segment(c, aid, start, rev)
        return len(keys)

    # -- reading ------------------------------------------------------------------------
    def revision(self) -> int:
        return self.db.execute("SELECT value FROM revisions WHERE name = 'memory'").fetchone()[0]

    def units(self, ids: Sequence[int]) -> dict[int, Unit]:
        """Segments by id, as units of context."""
        names = self.agents()
        out: dict[int, Unit] = {}
        for chunk in _chunks(list(ids), 500):
            marks = ",".join("?" * len(chunk))
            for r in self.db.execute(
                f"SELECT id, agent_id, start_ms, end_ms, text, obs_ids FROM segments WHERE id IN ({marks})",
                tuple(chunk),
            ):
                obs = tuple(int(x) for x in r["obs_ids"].split(",") if x)
                out[r["id"]] = Unit(r["id"], names[r["agent_id"]], r["start_ms"], r["end_ms"], r["text"], obs)
        return out

    def counts(self) -> dict[str, int]:
        q = {
            "agents": "SELECT COUNT(*) FROM agents",
            "observations": "SELECT COUNT(*) FROM observations",
            "segments": "SELECT COUNT(*) FROM segments",
            "windows": "SELECT COUNT(*) FROM windows",
            "events": "SELECT COUNT(*) FROM events",
        }
        return {k: self.db.execute(v).fetchone()[0] for k, v in q.items()}

    def span(self) -> tuple[int | None, int | None]:
        r = self.db.execute("SELECT MIN(start_ms), MAX(end_ms) FROM observations").fetchone()
        return r[0], r[1]


def _chunks(xs: list, n: int):
    for i in range(0, len(xs), n):
        yield xs[i : i + n]


def _now() -> int:
    return int(time.time() * 1000)
