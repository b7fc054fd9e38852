"""The store: agents, observations (idempotent), segments derived from them, window bookkeeping."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sqlean as sqlite3

from memory.db import Database, is_full
from memory.errors import StorageFull
from memory.records import SEGMENT_MS, WINDOW_MS, Observation, Unit, clean_line, segment_start, window_start
from memory.schema import MIGRATIONS

logger = logging.getLogger(__name__)


@dataclass
class AddResult:
    inserted: int = 0
    duplicates: int = 0
    segments: int = 0
    refused: list[tuple[Observation, str]] = field(default_factory=list)  # (observation, why): a full segment

    def __iadd__(self, other: AddResult) -> AddResult:
        self.inserted += other.inserted
        self.duplicates += other.duplicates
        self.segments += other.segments
        self.refused += other.refused
        return self


@dataclass(frozen=True)
class SegmentCap:
    """The most one agent's 30-second segment may hold; beyond it observations are refused."""

    observations: int = 300
    bytes: int = 65_536


class Store:
    """One SQLite file of memory. One writer: the process that opened it read-write."""

    def __init__(self, path: str | Path, *, readonly: bool = False, reserve_mb: float = 0,
                 durable: bool = False, segment_cap: SegmentCap | None = None):
        """`durable`: a commit survives a power cut (synchronous=FULL) before `add` returns, for
        writers that acknowledge what they stored. `segment_cap`: refuse observations past it."""
        self.path = str(path)
        self.reserve_bytes = int(reserve_mb * 1_048_576)
        self._capped = False
        self.segment_cap = segment_cap
        self.db = Database(path, MIGRATIONS, readonly=readonly, synchronous="FULL" if durable else "NORMAL")
        self._agent_ids: dict[str, int] = {}

    def close(self) -> None:
        self.db.close()

    # -- agents -------------------------------------------------------------------------
    def agent_id(self, name: str) -> int:
        if name not in self._agent_ids:
            row = self.db.execute("SELECT id FROM agents WHERE name = ?", (name,)).fetchone()
            if row is None:  # another connection may make the same agent at the same moment
                with self.db.atomic() as c:
                    c.execute("INSERT OR IGNORE INTO agents (name, created_ms) VALUES (?, ?)", (name, _now()))
                    row = c.execute("SELECT id FROM agents WHERE name = ?", (name,)).fetchone()
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
            ob = _one_line(ob)
            ob.check()
            rows.append((self.agent_id(ob.agent), ob))
        with self.db.atomic() as c:
            room = _Room(c, self.segment_cap)
            for aid, ob in rows:
                why = room.refuses(aid, ob)
                if why:
                    result.refused.append((ob, why))
                    continue
                cur = c.execute(
                    """INSERT OR IGNORE INTO observations
                       (agent_id, kind, start_ms, end_ms, text, speaker, lang, ext_id, recorded_ms)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                    (aid, ob.kind, ob.start_ms, ob.end_ms, ob.text, ob.speaker, ob.lang, ob.key(), now),
                )
                if cur.rowcount:
                    room.took(aid, ob)
                    result.inserted += 1
                    touched.add((aid, segment_start(ob.start_ms)))
                    windows.add(window_start(ob.start_ms))
                else:
                    result.duplicates += 1
            if touched:
                rev = self.bump_revision(c)
                for aid, start in sorted(touched):
                    self._build_segment(c, aid, start, rev)
                c.executemany(
                    """INSERT INTO windows (start_ms, end_ms, updated_ms, rev) VALUES (?, ?, ?, ?)
                       ON CONFLICT (start_ms) DO UPDATE SET updated_ms = excluded.updated_ms, rev = excluded.rev""",
                    [(w, w + WINDOW_MS, now, rev) for w in sorted(windows)],
                )
        result.segments = len(touched)
        return result

    def bump_revision(self, c) -> int:
        """Inside a transaction on connection `c`: the memory's revision, one higher (derived indices
        rebuild what changed after the revision they saw)."""
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
            rev = self.bump_revision(c)
            keys = c.execute(
                f"SELECT DISTINCT agent_id, start_ms - start_ms % {SEGMENT_MS} FROM observations"
            ).fetchall()
            for aid, start in keys:
                self._build_segment(c, aid, start, rev)
        return len(keys)

    # -- reading ------------------------------------------------------------------------
    def line_times(self, obs_ids: Sequence[int]) -> list[tuple[int, int, str]]:
        """(start, end, line as a unit shows it) of these observations: a transcript is
        'speaker: text'."""
        out = []
        for chunk in _chunks(list(obs_ids), 500):
            for start, end, kind, speaker, text in self.db.execute(
                    f"SELECT start_ms, end_ms, kind, speaker, text FROM observations WHERE id IN "
                    f"({','.join('?' * len(chunk))})", tuple(chunk)):
                out.append((start, end, f"{speaker}: {text}" if kind == "transcript" and speaker else text))
        return out

    def unindexed(self, index: str, table: str) -> int:
        """Rows of `table` ('segments' or 'events') changed since the vector index `index` last saw."""
        if table not in ("segments", "events"):
            raise ValueError(table)
        row = self.db.execute("SELECT rev FROM vector_indices WHERE name = ?", (index,)).fetchone()
        return self.db.execute(f"SELECT COUNT(*) FROM {table} WHERE rev > ?", (row[0] if row else 0,)).fetchone()[0]

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

    def spans(self, ids: Sequence[int]) -> dict[int, Unit]:
        """Segments by id without their text and observations (empty): what ranking needs of the
        hundreds of candidates of a question; `units` then reads the few chosen in full."""
        names = self.agents()
        out: dict[int, Unit] = {}
        for chunk in _chunks(list(ids), 500):
            for i, a, s, e in self.db.execute(
                f"SELECT id, agent_id, start_ms, end_ms FROM segments WHERE id IN ({','.join('?' * len(chunk))})",
                tuple(chunk),
            ):
                out[i] = Unit(i, names[a], s, e, "")
        return out

    def beside(self, units: Sequence[Unit], step: int, as_of_ms: int | None = None) -> dict[int, Unit]:
        """The same agent's segment `step` slots after each unit (before it when negative), keyed by
        the unit's id; none that holds an observation ending after `as_of_ms`."""
        names = self.agents()
        ids = {name: aid for aid, name in names.items()}
        out: dict[int, Unit] = {}
        for u in units:
            if u.agent not in ids:
                continue
            r = self.db.execute(
                "SELECT id, agent_id, start_ms, end_ms, text, obs_ids, last_ms FROM segments WHERE agent_id = ? AND start_ms = ?",
                (ids[u.agent], segment_start(u.start_ms) + step * SEGMENT_MS),
            ).fetchone()
            if r is not None and (as_of_ms is None or r["last_ms"] <= as_of_ms):
                obs = tuple(int(x) for x in r["obs_ids"].split(",") if x)
                out[u.id] = Unit(r["id"], names[r["agent_id"]], r["start_ms"], r["end_ms"], r["text"], obs)
        return out

    def between(self, start_ms: int, end_ms: int, as_of_ms: int | None = None, limit: int = 5000) -> list[Unit]:
        """Every agent's segments that start in [start, end), none that holds an observation ending
        after `as_of_ms`, in time order (at most `limit`)."""
        names = self.agents()
        rows = self.db.execute(
            """SELECT id, agent_id, start_ms, end_ms, text, obs_ids FROM segments
               WHERE start_ms >= ? AND start_ms < ? AND last_ms <= ? ORDER BY start_ms, agent_id LIMIT ?""",
            (start_ms, end_ms, 2**62 if as_of_ms is None else as_of_ms, int(limit))).fetchall()
        return [Unit(r["id"], names[r["agent_id"]], r["start_ms"], r["end_ms"], r["text"],
                     tuple(int(x) for x in r["obs_ids"].split(",") if x)) for r in rows]

    def busiest_agents(self, before_ms: int, limit: int) -> list[str]:
        """The `limit` agents with the most segments starting before `before_ms`, most first."""
        return [r[0] for r in self.db.execute(
            """SELECT a.name FROM segments s JOIN agents a ON a.id = s.agent_id WHERE s.start_ms < ?
               GROUP BY s.agent_id ORDER BY COUNT(*) DESC, a.name LIMIT ?""", (before_ms, limit))]

    def segment_rows(self) -> list:
        """(id, agent_id, last_ms, text) of every segment, in id order: for whole-memory indices."""
        return self.db.execute("SELECT id, agent_id, last_ms, text FROM segments ORDER BY id").fetchall()

    def ping(self) -> bool:
        """The database answers (the watchdog's health check)."""
        try:
            self.db.execute("SELECT 1").fetchone()
            return True
        except Exception:
            return False

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


def _one_line(ob: Observation) -> Observation:
    """Text and speaker as one line each, whoever wrote them (a wire, a recognizer, a file)."""
    text, speaker = clean_line(ob.text), clean_line(ob.speaker) if ob.speaker else ob.speaker
    if (text, speaker) == (ob.text, ob.speaker):
        return ob
    return dataclasses.replace(ob, text=text, speaker=speaker or None)


class _Room:
    """What the segments touched by one `add` hold, so that none grows past its cap."""

    def __init__(self, c, cap: SegmentCap | None):
        self.c, self.cap = c, cap
        self.held: dict[tuple[int, int], list[int]] = {}

    def _load(self, aid: int, start: int) -> list[int]:
        key = (aid, start)
        if key not in self.held:
            n, size = self.c.execute(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) FROM observations "
                "WHERE agent_id = ? AND start_ms >= ? AND start_ms < ?", (aid, start, start + SEGMENT_MS)).fetchone()
            self.held[key] = [n, size]
        return self.held[key]

    def refuses(self, aid: int, ob: Observation) -> str | None:
        if self.cap is None:
            return None
        n, size = self._load(aid, segment_start(ob.start_ms))
        if n + 1 > self.cap.observations or size + len(ob.text.encode()) > self.cap.bytes:
            return (f"the 30-second segment of {ob.agent} at {segment_start(ob.start_ms)} is full ({n} observations, "
                    f"{size} bytes; cap {self.cap.observations}, {self.cap.bytes})")
        return None

    def took(self, aid: int, ob: Observation) -> None:
        if self.cap is not None:
            held = self._load(aid, segment_start(ob.start_ms))
            held[0] += 1
            held[1] += len(ob.text.encode())


def _chunks(xs: list, n: int):
    for i in range(0, len(xs), n):
        yield xs[i : i + n]


def _now() -> int:
    return int(time.time() * 1000)
