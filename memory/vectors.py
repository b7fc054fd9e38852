"""Dense vectors of segments and events in sqlite-vec, refreshed by store revision.

One vec0 table per source and encoder (`vec_segments`, `vec_events` for MiniLM; with a key,
`vec_segments_<key>`: vectors of different encoders never share a table) with the unit's as-of time and agent as
metadata columns, so a k-nearest query filters "recorded before as_of" inside sqlite-vec. The
embedding function is passed in (memory imports no model code); `vector_indices` records which
model wrote the vectors and up to which revision, so a changed model rebuilds and a refresh
embeds only rows changed since. Units with no text the encoder can read get no vector.

Searches read a mirror of the table in memory (`memory/vecmatrix.py`: one float32 matrix per day,
filtered by as-of and agent with numpy), brought up to the table's revision before each search;
the vec0 table stays the durable copy and the one other processes read.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import sqlean as sqlite3

from memory.db import is_full
from memory.lexical import EVENTS, SEGMENTS, Source
from memory.store import Store
from memory.tokenize import english_view
from memory.vecmatrix import VectorMatrix

logger = logging.getLogger(__name__)
Embed = Callable[[list[str]], np.ndarray]
BATCH = 1024  # rows a refresh embeds and commits at a time (sorted by tokens within it)


class VectorIndex:
    def __init__(self, store: Store, embed: Embed, *, model: str, dim: int, source: Source = SEGMENTS,
                 view: Callable[[str], str] = english_view, key: str = ""):
        self.store, self.embed, self.model, self.dim, self.source, self.view = store, embed, model, dim, source, view
        self.name = f"{source.name}_{key}" if key else source.name  # its row in `vector_indices`
        self.table = f"vec_{self.name}"
        self.matrix = VectorMatrix(dim)
        self._mirror = threading.Lock()

    def _ensure(self) -> int:
        """The revision already embedded; (re)creates the table when the model or dimension changed."""
        db = self.store.db
        row = db.execute("SELECT model, dim, rev FROM vector_indices WHERE name = ?", (self.name,)).fetchone()
        if row and row[0] == self.model and row[1] == self.dim and self._exists():
            return row[2]
        self.matrix.clear()
        with db.atomic() as c:
            c.execute(f"DROP TABLE IF EXISTS {self.table}")
            c.execute(f"CREATE VIRTUAL TABLE {self.table} USING vec0(embedding float[{self.dim}] "
                       "distance_metric=cosine, asof_ms integer, agent_id integer)")
            c.execute("INSERT OR REPLACE INTO vector_indices (name, model, dim, rev) VALUES (?, ?, ?, 0)",
                       (self.name, self.model, self.dim))
        return 0

    def _exists(self) -> bool:
        return bool(self.store.db.execute(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (self.table,)).fetchone())

    def reset(self) -> None:
        """Forget every vector: the next refresh embeds the whole source again."""
        self.store.db.execute("DELETE FROM vector_indices WHERE name = ?", (self.name,))
        self.matrix.clear()

    def pending(self) -> int:
        rev = self._ensure()
        return self.store.db.execute(f"SELECT COUNT(*) FROM {self.source.table} WHERE rev > ?", (rev,)).fetchone()[0]

    def refresh(self, progress: Callable[[int], None] | None = None, *, limit: int | None = None,
                stop: Callable[[], bool] | None = None, batch: int = BATCH, most: int | None = None) -> int:
        """Embeds the rows changed since the last refresh; returns how many were (re)embedded.
        With `limit`, a backlog larger than that is left alone (to a background refresh) and 0
        returned. With `most`, the oldest `most` rows of the backlog are embedded, and the rest of
        the store revision the last of them belongs to (a revision is never split between calls,
        so the next call goes on after it). `stop()` is asked between batches: a stopped (or killed) refresh keeps what it
        stored and the next one goes on from the last store revision it finished. On a full disk the rows wait (logged, 0 returned): a
        question is answered without their vectors."""
        try:
            return self._refresh(progress, limit, stop, batch, most)
        except (sqlite3.OperationalError, OSError) as e:
            if not is_full(e):
                raise
            logger.warning("%s vectors wait for disk space (%s)", self.name, e)
            return 0

    def _refresh(self, progress: Callable[[int], None] | None, limit: int | None,
                 stop: Callable[[], bool] | None, batch: int, most: int | None = None) -> int:
        rev = self._ensure()
        s = self.source
        db = self.store.db
        top = self.store.revision()
        if limit is not None and db.execute(f"SELECT COUNT(*) FROM {s.table} WHERE rev > ? AND rev <= ?",
                                            (rev, top)).fetchone()[0] > limit:
            return 0
        if most is not None:  # up to the revision of the backlog's `most`-th row, whole
            last = db.execute(f"SELECT rev FROM {s.table} WHERE rev > ? AND rev <= ? ORDER BY rev LIMIT 1 OFFSET ?",
                              (rev, top, max(most, 1) - 1)).fetchone()
            top = last[0] if last else top
        # in revision order, so that the revision reached is saved with each batch: a stopped or
        # killed refresh resumes there (redoing at most the rows of one store revision)
        rows = db.execute(
            f"SELECT id, {s.agent_sql}, {s.asof_sql}, {s.text_sql}, rev FROM {s.table} WHERE rev > ? AND rev <= ? "
            "ORDER BY rev, id", (rev, top)).fetchall()
        t0, done = time.perf_counter(), 0
        for i in range(0, len(rows), batch):
            if stop and stop():
                return done
            chunk = rows[i:i + batch]
            views = [(r[0], r[1], r[2], self.view(r[3])) for r in chunk]
            keep = [v for v in views if v[3]]
            vecs = self.embed([v[3] for v in keep]) if keep else np.zeros((0, self.dim), np.float32)
            reached = rows[i + batch][4] - 1 if i + batch < len(rows) else top
            with db.atomic() as c:
                c.executemany(f"DELETE FROM {self.table} WHERE rowid = ?", [(v[0],) for v in views])
                c.executemany(
                    f"INSERT INTO {self.table} (rowid, embedding, asof_ms, agent_id) VALUES (?, ?, ?, ?)",
                    [(v[0], vec.astype(np.float32).tobytes(), v[2], v[1]) for v, vec in zip(keep, vecs, strict=True)])
                if reached > rev:
                    c.execute("UPDATE vector_indices SET rev = ? WHERE name = ?", (reached, self.name))
            done += len(chunk)
            if progress:
                progress(len(chunk))
        if top != rev and not rows:
            db.execute("UPDATE vector_indices SET rev = ? WHERE name = ?", (top, self.name))
        if rows:
            logger.info("embedded %d %s in %.1f s", len(rows), self.name, time.perf_counter() - t0)
        return done

    def search(self, query_vec: np.ndarray, *, k: int, as_of: int | None = None,
               agents: Sequence[int] | None = None) -> list[tuple[int, float]]:
        """(id, cosine similarity), best first, among units recorded before `as_of`."""
        rev = self._ensure()
        with self._mirror:
            self._follow(rev)
            return self.matrix.search(query_vec, k=k, as_of=as_of, agents=agents)

    def _follow(self, rev: int) -> None:
        """Brings the in-memory mirror to the table's revision: all rows at first (or after a
        reset), then only the rows of units changed since the revision it holds."""
        m, db = self.matrix, self.store.db
        if m.rev == rev:
            return
        t0 = time.perf_counter()
        if m.rev < 0 or rev < m.rev:
            m.clear()
            m.load(db.execute(f"SELECT rowid, embedding, asof_ms, agent_id FROM {self.table}"))
            logger.info("%s: %d vectors in memory (%.0f MB) in %.2f s", self.name, len(m), m.nbytes() / 1e6,
                        time.perf_counter() - t0)
        else:
            ids = [r[0] for r in db.execute(f"SELECT id FROM {self.source.table} WHERE rev > ? AND rev <= ?",
                                            (m.rev, rev))]
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                rows = db.execute(f"SELECT rowid, embedding, asof_ms, agent_id FROM {self.table} WHERE rowid IN "
                                  f"({','.join('?' * len(chunk))})", chunk).fetchall()
                m.remove(set(chunk) - {r[0] for r in rows})
                m.upsert(rows)
        m.rev = rev

    def search_sql(self, query_vec: np.ndarray, *, k: int, as_of: int | None = None,
                   agents: Sequence[int] | None = None) -> list[tuple[int, float]]:
        """The same search by sqlite-vec's own k-nearest query (the reference the mirror is checked
        against in the tests and the benchmark)."""
        self._ensure()
        where, args = "embedding MATCH ? AND k = ?", [query_vec.astype(np.float32).tobytes(), k]
        if as_of is not None:
            where += " AND asof_ms <= ?"
            args.append(as_of)
        if agents is not None:
            if not agents:
                return []
            where += f" AND agent_id IN ({','.join('?' * len(agents))})"
            args.extend(agents)
        rows = self.store.db.execute(
            f"SELECT rowid, distance FROM {self.table} WHERE {where} ORDER BY distance", tuple(args)).fetchall()
        return [(r[0], 1.0 - r[1]) for r in rows]

__all__ = ["VectorIndex", "SEGMENTS", "EVENTS"]
