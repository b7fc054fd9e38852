"""Camera frames: JPEG files on disk per agent and hour, their facts in the store, a retention
policy (age and total size, oldest first), optional vectors in sqlite-vec, and the frames nearest
to a piece of evidence.

Files are written before their row and deleted after it, so a crash leaves at worst a file the
store does not know (`sweep` removes those), never a row without its file for long.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from memory.clock import HouseClock
from memory.errors import RecordError
from memory.records import Unit
from memory.store import Store

logger = logging.getLogger(__name__)
VEC_TABLE, VEC_NAME = "vec_frames", "frames"


class FrameSettings(BaseModel):
    """Camera frames on disk and how long they are kept."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Store frames from agents/{agent}/frame.")
    dir: Path | None = Field(None, description="Folder of the JPEG files (default: beside the database, "
                                                "<db>.frames/).")
    every_ms: int = Field(1000, ge=0, description="Keep at most one frame per agent per this many ms.")
    max_age_h: float = Field(168.0, gt=0, description="Frames older than this (capture time) are deleted.")
    max_mb: float = Field(10240.0, gt=0, description="Total size of the stored frames; the oldest go first.")
    max_frame_bytes: int = Field(2_000_000, ge=1024, description="Larger frame messages are rejected.")
    queue_mb: float = Field(64.0, gt=0, description="Frames waiting to be written before drops.")
    retention_every_s: float = Field(30.0, gt=0, description="Period of the retention pass.")


@dataclass(frozen=True)
class Frame:
    id: int
    agent: str
    ts_ms: int
    path: Path
    bytes: int
    width: int | None = None
    height: int | None = None

    def as_json(self, clock: HouseClock, **extra) -> dict:
        return {"agent": self.agent, "ts": clock.iso(self.ts_ms), "ts_ms": self.ts_ms, "path": str(self.path),
                "bytes": self.bytes, "width": self.width, "height": self.height} | extra


@dataclass
class Retention:
    deleted: int = 0
    freed: int = 0
    kept: int = 0
    kept_bytes: int = 0


class FrameStore:
    """Frames of one store. Writers: the daemon's frame worker; readers: answers and searches."""

    def __init__(self, store: Store, root: Path | None = None):
        self.store, self.db = store, store.db
        self.root = Path(root) if root else Path(store.path + ".frames")

    # -- writing ------------------------------------------------------------------------
    def add(self, agent: str, ts_ms: int, seq: int, jpeg: bytes, ext_id: str | None = None) -> Frame | None:
        """Store one frame; None when it is stored already (same agent and id, else same time and seq)."""
        size = jpeg_size(jpeg)
        if size is None:
            raise RecordError("not a JPEG image (no SOI/SOF marker)")
        aid = self.store.agent_id(agent)
        key = ext_id or f"{ts_ms}-{seq}"
        # the file is named by (agent, ts, seq): another id at the same place is a duplicate, not an overwrite
        if self.db.execute("SELECT 1 FROM frames WHERE agent_id = ? AND (ext_id = ? OR (ts_ms = ? AND seq = ?))",
                           (aid, key, ts_ms, seq)).fetchone():
            return None
        hour = datetime.fromtimestamp(ts_ms / 1000, UTC).strftime("%Y-%m-%d/%H")
        rel = f"{agent}/{hour}/{ts_ms}-{seq}.jpg"
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(jpeg)
        os.replace(tmp, path)
        with self.db.atomic() as c:
            cur = c.execute(
                """INSERT OR IGNORE INTO frames (agent_id, ts_ms, seq, path, bytes, width, height, ext_id, recorded_ms)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (aid, ts_ms, seq, rel, len(jpeg), size[0], size[1], key, int(time.time() * 1000)))
        if not cur.rowcount:
            return None
        return Frame(cur.lastrowid, agent, ts_ms, path, len(jpeg), size[0], size[1])

    def enforce(self, *, max_bytes: int, max_age_ms: int, now_ms: int | None = None) -> Retention:
        """Delete frames older than `max_age_ms`, then the oldest until the rest fit in `max_bytes`."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        r = Retention()
        while True:
            total = self.total_bytes()
            rows = self.db.execute(
                "SELECT id, path, bytes, ts_ms FROM frames ORDER BY ts_ms, id LIMIT 500").fetchall()
            doomed, over = [], total - max_bytes
            for row in rows:
                if row["ts_ms"] >= now_ms - max_age_ms and over <= 0:
                    break
                doomed.append(row)
                over -= row["bytes"]
            if not doomed:
                break
            self._delete(doomed)
            r.deleted += len(doomed)
            r.freed += sum(row["bytes"] for row in doomed)
        r.kept, r.kept_bytes = self.db.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM frames").fetchone()
        if r.deleted:
            logger.info("retention deleted %d frames (%d bytes); %d frames (%d bytes) kept",
                        r.deleted, r.freed, r.kept, r.kept_bytes)
        return r

    def _delete(self, rows) -> None:
        ids = [(row["id"],) for row in rows]
        with self.db.atomic() as c:
            c.executemany("DELETE FROM frames WHERE id = ?", ids)
            if self._vec_dim() is not None:
                c.executemany(f"DELETE FROM {VEC_TABLE} WHERE rowid = ?", ids)
        for row in rows:  # after the commit: a crash here leaves files that `sweep` removes
            (self.root / row["path"]).unlink(missing_ok=True)

    def sweep(self) -> int:
        """Remove files the store does not know (left by a crash between a write and its row)."""
        if not self.root.is_dir():
            return 0
        known = {r[0] for r in self.db.execute("SELECT path FROM frames")}
        removed = 0
        for p in self.root.rglob("*"):
            rel = p.relative_to(self.root).as_posix()
            if p.is_file() and rel not in known and (p.suffix == ".jpg" or ".tmp" in p.suffix):
                p.unlink(missing_ok=True)
                removed += 1
        return removed

    # -- reading ------------------------------------------------------------------------
    def total_bytes(self) -> int:
        return self.db.execute("SELECT COALESCE(SUM(bytes), 0) FROM frames").fetchone()[0]

    def _frames(self, where: str, params: tuple, order: str = "f.ts_ms", limit: int = 100) -> list[Frame]:
        rows = self.db.execute(
            f"""SELECT f.id, a.name, f.ts_ms, f.path, f.bytes, f.width, f.height FROM frames f
                JOIN agents a ON a.id = f.agent_id WHERE {where} ORDER BY {order} LIMIT {int(limit)}""",
            params).fetchall()
        return [Frame(r[0], r[1], r[2], self.root / r[3], r[4], r[5], r[6]) for r in rows]

    def near(self, agent: str, start_ms: int, end_ms: int, *, limit: int = 1, slack_ms: int = 60_000) -> list[Frame]:
        """The agent's frames nearest to [start, end] (inside first, then by distance), within `slack_ms`."""
        mid = (start_ms + end_ms) // 2
        return self._frames(
            "a.name = ? AND f.ts_ms BETWEEN ? AND ?", (agent, start_ms - slack_ms, end_ms + slack_ms),
            order=f"(f.ts_ms < {int(start_ms)} OR f.ts_ms > {int(end_ms)}), ABS(f.ts_ms - {int(mid)})", limit=limit)

    def for_evidence(self, units: list[Unit], *, per_unit: int = 1, as_of_ms: int | None = None) -> list[Frame]:
        """The stored frames nearest to each unit of evidence, in the units' order, each once."""
        out: dict[int, Frame] = {}
        for u in units:
            for f in self.near(u.agent, u.start_ms, u.end_ms, limit=per_unit):
                if as_of_ms is None or f.ts_ms <= as_of_ms:
                    out.setdefault(f.id, f)
        return list(out.values())

    def counts(self) -> dict[str, int]:
        n, b = self.db.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM frames").fetchone()
        return {"frames": n, "bytes": b, "vectors": self.vector_count()}

    # -- vectors ---------------------------------------------------------------------------
    # one vec0 table with the capture time and agent as metadata columns, so a k-nearest query
    # filters "captured by as_of" and "these agents" inside sqlite-vec; `vector_indices` (shared
    # with the text vectors) records the model and width that made it
    def _vec_dim(self) -> int | None:
        row = self.db.execute("SELECT dim FROM vector_indices WHERE name = ?", (VEC_NAME,)).fetchone()
        return row[0] if row else None

    def ensure_vectors(self, model: str, dim: int) -> None:
        """Make the vector table for `model`; a different model (or width) starts it afresh."""
        row = self.db.execute("SELECT model, dim FROM vector_indices WHERE name = ?", (VEC_NAME,)).fetchone()
        exists = self.db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (VEC_TABLE,)).fetchone()
        if row and (row[0], row[1]) == (model, dim) and exists:
            return
        with self.db.atomic() as c:
            c.execute(f"DROP TABLE IF EXISTS {VEC_TABLE}")
            c.execute(f"CREATE VIRTUAL TABLE {VEC_TABLE} USING vec0(embedding float[{int(dim)}] "
                      "distance_metric=cosine, ts_ms integer, agent_id integer)")
            c.execute("INSERT OR REPLACE INTO vector_indices (name, model, dim, rev) VALUES (?, ?, ?, 0)",
                      (VEC_NAME, model, dim))
        if row:
            logger.warning("frame vectors were made by %s (%d); starting afresh for %s (%d)", row[0], row[1], model, dim)

    def add_vector(self, frame_id: int, vec: np.ndarray) -> None:
        with self.db.atomic() as c:
            row = c.execute("SELECT ts_ms, agent_id FROM frames WHERE id = ?", (frame_id,)).fetchone()
            if row is None:
                return  # deleted by retention meanwhile
            c.execute(f"DELETE FROM {VEC_TABLE} WHERE rowid = ?", (frame_id,))
            c.execute(f"INSERT INTO {VEC_TABLE} (rowid, embedding, ts_ms, agent_id) VALUES (?, ?, ?, ?)",
                      (frame_id, np.asarray(vec, dtype=np.float32).tobytes(), row[0], row[1]))

    def without_vectors(self, limit: int = 64) -> list[Frame]:
        """Frames stored before the embedder was configured (or changed), newest first."""
        if not self._vec_dim():
            return []
        return self._frames(f"f.id NOT IN (SELECT rowid FROM {VEC_TABLE})", (), order="f.ts_ms DESC", limit=limit)

    def vector_count(self) -> int:
        return self.db.execute(f"SELECT COUNT(*) FROM {VEC_TABLE}").fetchone()[0] if self._vec_dim() else 0

    def search(self, vec: np.ndarray, *, k: int = 5, as_of_ms: int | None = None,
               agents: tuple[str, ...] | None = None) -> list[tuple[Frame, float]]:
        """Frames whose vectors are nearest to `vec` (cosine distance), captured by `as_of_ms`."""
        if not self._vec_dim():
            return []
        where, args = "embedding MATCH ? AND k = ?", [np.asarray(vec, dtype=np.float32).tobytes(), k]
        if as_of_ms is not None:
            where += " AND ts_ms <= ?"
            args.append(as_of_ms)
        if agents:
            ids = [r[0] for r in self.db.execute(
                f"SELECT id FROM agents WHERE name IN ({','.join('?' * len(agents))})", tuple(agents))]
            if not ids:
                return []
            where += f" AND agent_id IN ({','.join('?' * len(ids))})"
            args.extend(ids)
        dist = {r[0]: r[1] for r in self.db.execute(
            f"SELECT rowid, distance FROM {VEC_TABLE} WHERE {where} ORDER BY distance", tuple(args))}
        if not dist:
            return []
        frames = self._frames(f"f.id IN ({','.join('?' * len(dist))})", tuple(dist), limit=len(dist))
        return sorted(((f, dist[f.id]) for f in frames), key=lambda x: x[1])


def jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the JPEG's frame header, or None when `data` is not a JPEG."""
    if not data.startswith(b"\xff\xd8"):
        return None
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        length = struct.unpack(">H", data[i + 2:i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start-of-frame segment
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return w, h
        i += 2 + length
    return None
