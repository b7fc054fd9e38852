"""Reading the memory by time, for the web page and Home Assistant: an agent's lines and units in a
span, the shared-memory events and windows of a span, coverage per agent (captions, speech,
frames) in buckets, and a summary of what is stored. Read-only; one connection, one caller at a
time (a lock: the web server reads from several worker threads)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from memory.events import Event, EventStore
from memory.frames import Frame, FrameStore
from memory.records import Unit
from memory.store import Store


@dataclass(frozen=True)
class Line:
    """One observation as the page shows it."""

    id: int
    agent: str
    kind: str
    start_ms: int
    end_ms: int
    text: str
    speaker: str | None


class Browse:
    def __init__(self, store: Store, frames_root: Path | None = None):
        self.store, self.db = store, store.db
        self.events_store = EventStore(store)
        self.frames = FrameStore(store, frames_root)
        self.lock = threading.Lock()

    def agents(self) -> list[str]:
        with self.lock:
            return sorted(self.store.agents().values())

    def _agent_id(self, agent: str) -> int | None:
        row = self.db.execute("SELECT id FROM agents WHERE name = ?", (agent,)).fetchone()
        return row[0] if row else None

    def lines(self, agent: str, start_ms: int, end_ms: int, *, limit: int = 500) -> list[Line]:
        """The agent's observations that start in [start, end), in time order."""
        with self.lock:
            aid = self._agent_id(agent)
            if aid is None:
                return []
            rows = self.db.execute(
                """SELECT id, kind, start_ms, end_ms, text, speaker FROM observations
                   WHERE agent_id = ? AND start_ms >= ? AND start_ms < ? ORDER BY start_ms, id LIMIT ?""",
                (aid, start_ms, end_ms, int(limit))).fetchall()
        return [Line(r[0], agent, r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def units(self, agent: str, start_ms: int, end_ms: int, *, limit: int = 500) -> list[Unit]:
        """The agent's 30-second units that overlap [start, end), in time order."""
        with self.lock:
            aid = self._agent_id(agent)
            if aid is None:
                return []
            rows = self.db.execute(
                """SELECT id, start_ms, end_ms, text, obs_ids FROM segments
                   WHERE agent_id = ? AND start_ms < ? AND end_ms > ? ORDER BY start_ms LIMIT ?""",
                (aid, end_ms, start_ms, int(limit))).fetchall()
        return [Unit(r[0], agent, r[1], r[2], r[3], tuple(int(x) for x in r[4].split(",") if x)) for r in rows]

    def events(self, start_ms: int, end_ms: int, *, limit: int = 2000) -> list[Event]:
        """Shared-memory events of the windows that overlap [start, end)."""
        with self.lock:
            ids = [r[0] for r in self.db.execute(
                "SELECT id FROM events WHERE end_ms > ? AND start_ms < ? ORDER BY start_ms, id LIMIT ?",
                (start_ms, end_ms, int(limit)))]
            return self.events_store.events(ids)

    def windows(self, start_ms: int, end_ms: int) -> list[dict]:
        """The 10-minute windows that overlap [start, end): their state and number of events."""
        with self.lock:
            rows = self.db.execute(
                """SELECT w.start_ms, w.end_ms, w.rev, w.consolidated_rev,
                          (SELECT COUNT(*) FROM events e WHERE e.window_start_ms = w.start_ms)
                   FROM windows w WHERE w.end_ms > ? AND w.start_ms < ? ORDER BY w.start_ms""",
                (start_ms, end_ms)).fetchall()
        return [{"start_ms": r[0], "end_ms": r[1], "events": r[4],
                 "state": "consolidated" if r[3] is not None and r[3] >= r[2] else "pending"} for r in rows]

    def coverage(self, start_ms: int, end_ms: int, bucket_ms: int) -> dict[str, list[dict]]:
        """Per agent, the buckets of [start, end) that hold anything: how many captions, transcript
        lines, frame captions and stored frames start in each."""
        out: dict[str, dict[int, dict]] = {}

        def put(agent: str, b: int, key: str, n: int) -> None:
            cell = out.setdefault(agent, {}).setdefault(b, {"t": start_ms + b * bucket_ms, "caption": 0,
                                                             "transcript": 0, "frame_caption": 0, "frame": 0})
            cell[key] += n

        with self.lock:
            for aid, agent in self.store.agents().items():
                for kind, b, n in self.db.execute(
                        """SELECT kind, (start_ms - ?) / ?, COUNT(*) FROM observations
                           WHERE agent_id = ? AND start_ms >= ? AND start_ms < ? GROUP BY 1, 2""",
                        (start_ms, bucket_ms, aid, start_ms, end_ms)):
                    put(agent, b, kind, n)
                for b, n in self.db.execute(
                        """SELECT (ts_ms - ?) / ?, COUNT(*) FROM frames
                           WHERE agent_id = ? AND ts_ms >= ? AND ts_ms < ? GROUP BY 1""",
                        (start_ms, bucket_ms, aid, start_ms, end_ms)):
                    put(agent, b, "frame", n)
        return {a: [cells[b] for b in sorted(cells)] for a, cells in sorted(out.items())}

    def frame_near(self, agent: str, ts_ms: int, slack_ms: int) -> Frame | None:
        """The agent's stored frame nearest to `ts_ms`, within `slack_ms`; its file is the one the
        store recorded, inside the frames folder."""
        with self.lock:
            found = self.frames.near(agent, ts_ms, ts_ms, limit=1, slack_ms=slack_ms)
        if not found:
            return None
        f = found[0]
        if not f.path.resolve().is_relative_to(self.frames.root.resolve()):
            return None
        return f

    def span(self) -> tuple[int | None, int | None]:
        with self.lock:
            return self.store.span()

    def summary(self, until_ms: int) -> dict[str, int]:
        """What is stored: observations, agents, events, and windows closed by `until_ms` that wait
        for consolidation."""
        with self.lock:
            c = self.store.counts()
            pending = self.db.execute(
                """SELECT COUNT(*) FROM windows WHERE end_ms <= ?
                   AND (consolidated_rev IS NULL OR rev > consolidated_rev)""", (until_ms,)).fetchone()[0]
            frames = self.db.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM frames").fetchone()
        return {"observations": c["observations"], "agents": c["agents"], "events": c["events"],
                "windows": c["windows"], "windows_pending": pending, "frames": frames[0], "frame_bytes": frames[1]}
