"""Lexical search with bm25s over segments or events, sharded by day and refreshed as data arrives.

bm25s has no incremental add, so the index is cut into sealed shards, one per UTC day of
event time. Every segment and event row carries the store revision that last changed it; a
refresh rebuilds only the shards that hold rows newer than the revision it last saw: while
streams run live that is today's shard alone. Shards are persisted beside the database file.

Each shard has its own document frequencies; a query re-weights each term by the ratio of the
global IDF (summed over shards) to the shard's own, so scores of different days compare as if
one index held the whole memory.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

from memory.clock import DAY_MS
from memory.shards import Shard, fill_df, read_shard, write_manifest, write_shard
from memory.store import Store
from memory.tokenize import VERSION as TOKENIZER_VERSION
from memory.tokenize import tokenize

logger = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets its own logger to DEBUG on import
FORMAT = f"1/{TOKENIZER_VERSION}"


@dataclass(frozen=True)
class Source:
    """What one index covers: a table with id, agent, start, as-of key, text and rev columns."""

    name: str
    table: str
    agent_sql: str
    asof_sql: str
    text_sql: str


SEGMENTS = Source("segments", "segments", "agent_id", "last_ms", "text")
EVENTS = Source(
    "events", "events", "-1", "end_ms",
    "who || ' ' || what || ' ' || COALESCE(place, '') || ' ' || COALESCE(how, '')",
)


class LexicalIndex:
    """BM25 over one source of the store, in day shards, persisted under `folder`."""

    def __init__(self, store: Store, source: Source = SEGMENTS, folder: str | Path | None = None):
        self.store = store
        self.source = source
        base = Path(folder) if folder else (
            None if store.path == ":memory:" else Path(store.path + ".index")
        )
        self.folder = base / source.name if base else None
        self.shards: dict[int, Shard] = {}
        self.seen_rev = 0
        self.last_refresh: dict = {}
        self._unsaved = False  # a shard could not be saved: the manifest on disk must stay older
        self._by_id: tuple[np.ndarray, np.ndarray] | None = None  # agent and start by row id (`spans`)
        self._df: dict[str, int] = {}  # token -> document frequency over every shard (`_global_df`)
        self._load()

    # -- building -----------------------------------------------------------------------
    def refresh(self) -> list[int]:
        """Rebuild the shards whose rows changed since the last refresh; returns their keys."""
        rev = self.store.revision()
        if rev == self.seen_rev:
            return []
        t0 = time.perf_counter()
        src = self.source
        if rev < self.seen_rev:  # a different or rebuilt database: start over
            self._by_id = None
            self.shards.clear()
            self._df.clear()
            self.seen_rev = 0
        keys = [
            r[0]
            for r in self.store.db.execute(
                f"SELECT DISTINCT start_ms / {DAY_MS} FROM {src.table} WHERE rev > ?", (self.seen_rev,)
            )
        ]
        for key in keys:
            self._build(key, rev)
        if keys:
            self._by_id = None
            self._df.clear()
        self.seen_rev = rev
        self._save_manifest()
        self.last_refresh = {"shards": keys, "seconds": time.perf_counter() - t0}
        if keys:
            logger.info("refreshed %s index: %d shard(s) in %.2fs", src.name, len(keys), time.perf_counter() - t0)
        return keys

    def rebuild(self) -> None:
        self._by_id = None
        self.shards.clear()
        self._df.clear()
        self.seen_rev = 0
        if self.folder and self.folder.exists():
            shutil.rmtree(self.folder)
        self.refresh()

    def _build(self, key: int, rev: int) -> None:
        src = self.source
        rows = self.store.db.execute(
            f"""SELECT id, {src.agent_sql}, start_ms, {src.asof_sql}, {src.text_sql} FROM {src.table}
                WHERE start_ms >= ? AND start_ms < ? ORDER BY start_ms, id""",
            (key * DAY_MS, (key + 1) * DAY_MS),
        ).fetchall()
        if not rows:
            self.shards.pop(key, None)
            self._drop_files(key)
            return
        bm = bm25s.BM25()
        bm.index([tokenize(r[4]) for r in rows], show_progress=False)
        shard = Shard(
            key, rev,
            ids=np.array([r[0] for r in rows], dtype=np.int64),
            agents=np.array([r[1] for r in rows], dtype=np.int32),
            starts=np.array([r[2] for r in rows], dtype=np.int64),
            asof=np.array([r[3] for r in rows], dtype=np.int64),
            bm25=bm,
        )
        fill_df(shard)
        self.shards[key] = shard
        self._save_shard(shard)

    # -- searching ----------------------------------------------------------------------
    def idf(self, token: str) -> float:
        n = sum(s.n for s in self.shards.values())
        df = self._global_df(token)
        return _idf(n, df) if df else 0.0

    def _global_df(self, token: str) -> int:
        """The token's document frequency over every shard, kept until a shard changes."""
        df = self._df.get(token)
        if df is None:
            df = self._df[token] = sum(s.df.get(token, 0) for s in self.shards.values())
        return df

    def containing(self, token: str) -> np.ndarray:
        """Ids of the rows whose text has `token` (from the index's own postings: no re-tokenizing)."""
        parts = [shard.ids[col[0]] for shard in self.shards.values() if (col := shard.column(token)) is not None]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def spans(self, ids) -> dict[int, tuple[int, int]]:
        """{id: (agent id, start ms)} of the rows indexed, from arrays in memory indexed by id (made
        again after a refresh that changed a shard): ranking a question's hundreds of candidates
        needs no SQL. Ids not indexed are left out."""
        if self._by_id is None:
            self._by_id = _by_id(self.shards.values())
        agent_of, start_of = self._by_id
        want = np.asarray(list(ids), dtype=np.int64)
        want = want[(want >= 0) & (want < len(agent_of))]
        want = want[agent_of[want] >= 0]
        return dict(zip(want.tolist(), zip(agent_of[want].tolist(), start_of[want].tolist(), strict=True),
                        strict=True))

    def search(
        self,
        tokens: Iterable[str] | Mapping[str, float],
        *,
        k: int = 15,
        as_of: int | None = None,
        agents: Iterable[int] | None = None,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ) -> list[tuple[int, float]]:
        """(row id, score) best first, among rows whose as-of key <= as_of, of those agents."""
        weights = _weights(tokens)
        if not weights or not self.shards:
            return []
        n_all = sum(s.n for s in self.shards.values())
        gidf = {t: _idf(n_all, self._global_df(t)) for t in weights}
        agent_arr = np.array(sorted(set(agents)), dtype=np.int32) if agents is not None else None
        cuts = [x for x in (as_of, end_ms) if x is not None]
        hi = min(cuts) if cuts else None
        found: list[tuple[np.ndarray, np.ndarray]] = []
        for key, shard in self.shards.items():
            if (hi is not None and key * DAY_MS > hi) or (
                start_ms is not None and (key + 1) * DAY_MS <= start_ms
            ):
                continue
            scores = np.zeros(shard.n, dtype=np.float32)
            for t, w in weights.items():
                col = shard.column(t)
                if col is None:
                    continue
                idx, vals = col
                scores[idx] += vals * (w * gidf[t] / _idf(shard.n, shard.df[t]))
            mask = scores > 0
            if as_of is not None:
                mask &= shard.asof <= as_of
            if end_ms is not None:
                mask &= shard.starts < end_ms
            if start_ms is not None:
                mask &= shard.starts >= start_ms
            if agent_arr is not None:
                mask &= np.isin(shard.agents, agent_arr)
            cand = np.flatnonzero(mask)
            if len(cand) > k:
                cand = cand[np.argpartition(-scores[cand], k - 1)[:k]]
            found.append((scores[cand], shard.ids[cand]))
        return _top(found, k)

    def search_many(self, queries: list[Mapping[str, float]], *, k: int = 15, as_of: int | None = None,
                    agents: Iterable[int] | None = None) -> list[list[tuple[int, float]]]:
        """`search` of several weighted queries at once (a question with each of its options): each
        shard's postings, filters and the terms all queries share with one weight are computed once."""
        ws = [_weights(q) for q in queries]
        out: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in ws]
        tokens = set().union(*ws) if ws else set()
        if not tokens or not self.shards:
            return [[] for _ in ws]
        n_all = sum(s.n for s in self.shards.values())
        gidf = {t: _idf(n_all, self._global_df(t)) for t in tokens}
        common = {t: w for t, w in ws[0].items() if all(x.get(t) == w for x in ws[1:])}
        agent_arr = np.array(sorted(set(agents)), dtype=np.int32) if agents is not None else None
        floor = [0.0] * len(ws)  # per query: a score the k-th best overall is known to reach
        for key, shard in self.shards.items():
            if as_of is not None and key * DAY_MS > as_of:
                continue
            cols = {}  # token -> (rows, BM25 of the shard, factor to the global idf)
            for t in tokens:
                col = shard.column(t)
                if col is not None:
                    cols[t] = (col[0], col[1], np.float32(gidf[t] / _idf(shard.n, shard.df[t])))
            if not cols:
                continue
            base = np.zeros(shard.n, dtype=np.float32)
            for t, w in common.items():
                if t in cols:
                    base[cols[t][0]] += cols[t][1] * (cols[t][2] * np.float32(w))
            keep = None
            if as_of is not None and shard.asof.max(initial=0) > as_of:
                keep = shard.asof <= as_of
            if agent_arr is not None:
                m = np.isin(shard.agents, agent_arr)
                keep = m if keep is None else keep & m
            for qi, w in enumerate(ws):
                scores = base.copy()
                for t, wt in w.items():
                    if t not in common and t in cols:
                        scores[cols[t][0]] += cols[t][1] * (cols[t][2] * np.float32(wt))
                # a row below another shard's k-th best cannot be in the k best overall (ties kept)
                mask = scores >= floor[qi] if floor[qi] > 0 else scores > 0
                if keep is not None:
                    mask &= keep
                cand = np.flatnonzero(mask)
                if len(cand) > k:
                    cand = cand[np.argpartition(-scores[cand], k - 1)[:k]]
                    floor[qi] = max(floor[qi], float(scores[cand].min()))
                out[qi].append((scores[cand], shard.ids[cand]))
        return [_top(f, k) for f in out]

    # -- persistence --------------------------------------------------------------------
    def _load(self) -> None:
        if not self.folder or not (self.folder / "manifest.json").exists():
            return
        try:
            manifest = json.loads((self.folder / "manifest.json").read_text())
            if manifest.get("format") != FORMAT:
                logger.info("%s index format changed: rebuilding", self.source.name)
                return
            keys, seen_rev = [int(k) for k in manifest["shards"]], int(manifest["seen_rev"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            logger.warning("%s index unreadable (%s): rebuilding", self.source.name, e)
            return
        broken = []
        for key in keys:
            try:
                self.shards[key] = read_shard(self.folder, key)
            except Exception as e:  # truncated by a crash, a full disk, a bad sector: it is only a cache
                logger.warning("%s index shard %d unreadable (%s: %s): rebuilding it", self.source.name, key,
                               type(e).__name__, e)
                broken.append(key)
        self.seen_rev = seen_rev
        if broken:
            rev = self.store.revision()
            for key in broken:
                self._build(key, rev)
            self._save_manifest()

    def _save_shard(self, shard: Shard) -> None:
        """Best effort: the saved shards are a cache of the store, so a full disk only costs a
        rebuild at the next start, never a question."""
        try:
            if self.folder:
                write_shard(self.folder, shard)
        except OSError as e:
            self._unsaved = True  # the old manifest stays, so the next start rebuilds this shard
            logger.warning("could not save %s index shard %d (%s); kept in memory", self.source.name, shard.key, e)

    def _drop_files(self, key: int) -> None:
        if self.folder:
            shutil.rmtree(self.folder / str(key), ignore_errors=True)

    def _save_manifest(self) -> None:
        if not self.folder or self._unsaved:
            return
        try:
            write_manifest(self.folder, {"format": FORMAT, "seen_rev": self.seen_rev, "shards": sorted(self.shards)})
        except OSError as e:  # a stale manifest only means a rebuild at the next start
            logger.warning("could not save the %s index manifest (%s)", self.source.name, e)

def _by_id(shards) -> tuple[np.ndarray, np.ndarray]:
    """(agent id, start ms) arrays indexed by row id; -1 where no row."""
    shards = [s for s in shards if s.n]
    top = max((int(s.ids.max()) for s in shards), default=-1) + 1
    agent_of, start_of = np.full(top, -1, np.int32), np.zeros(top, np.int64)
    for s in shards:
        agent_of[s.ids], start_of[s.ids] = s.agents, s.starts
    return agent_of, start_of


def _top(found: list[tuple[np.ndarray, np.ndarray]], k: int) -> list[tuple[int, float]]:
    """(id, score) of the k best of every shard's winners (scores, ids), best first, ties by id
    (a Python sort of ~7,000 pairs a query cost 40 ms at 10x the week)."""
    if not found:
        return []
    scores = np.concatenate([f[0] for f in found])
    ids = np.concatenate([f[1] for f in found])
    order = np.lexsort((ids, -scores))[:k]
    return list(zip(ids[order].tolist(), scores[order].tolist(), strict=True))


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _weights(tokens: Iterable[str] | Mapping[str, float]) -> dict[str, float]:
    if isinstance(tokens, Mapping):
        return {t: float(w) for t, w in tokens.items() if t and w > 0}
    out: dict[str, float] = {}
    for t in tokens:
        if t:
            out[t] = out.get(t, 0.0) + 1.0
    return out
