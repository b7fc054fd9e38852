"""The vectors of one vec0 table held in memory as contiguous matrices, one per day of as-of time.

sqlite-vec's k-nearest query reads every row of the table through SQL and applies the as-of and
agent filters row by row: tens of milliseconds over a week on 2 cores. A question only needs the
nearest units recorded before `as_of`, of some agents. Here each day (of the unit's as-of time) is
one block: a float32 [n, dim] matrix with the ids, as-of times and agents beside it, and the sign
bits of each vector (48 bytes for 384 dimensions). A search skips the days after `as_of` whole and
masks the rest by as-of and agent with numpy. When few rows pass (up to `EXACT`), their cosine is
computed outright; beyond, the `RERANK` rows nearest in Hamming distance of the sign bits are
re-ranked by their float cosine (on the EgoLife week, 10 x k re-ranked keeps 99 % of the exact
top 200; centring the vectors first did worse). The products avoid BLAS (`einsum`): numpy's
OpenBLAS starts a thread per core for a matrix-vector product, which on a box busy with other work
cost more than the product itself.

The matrices are a mirror, not a store: `VectorIndex` fills them from its vec0 table and keeps them
in step by store revision (the rows changed since are read back), so another process writing the
vectors (`chorus index` beside the daemon) is seen at the next search.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from memory.clock import DAY_MS

RERANK = 10  # x k rows re-ranked by their float cosine after the sign-bit pass
EXACT = 4  # x RERANK x k: up to this many rows pass the filters, every one is scored exactly


def sign_bits(vecs: np.ndarray) -> np.ndarray:
    """[n, dim] float -> [n, ceil(dim / 64)] uint64 of the signs."""
    bits = np.packbits(vecs > 0, axis=-1)
    pad = (-bits.shape[-1]) % 8
    if pad:
        bits = np.concatenate([bits, np.zeros((*bits.shape[:-1], pad), np.uint8)], axis=-1)
    return bits.view(np.uint64)


_BITS = np.array([bin(i).count("1") for i in range(256)], np.uint8)


def _popcount(words: np.ndarray) -> np.ndarray:
    """Set bits per uint64, same shape (numpy < 2 has no `bitwise_count`: a byte table)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(words)
    return _BITS[words.view(np.uint8)].reshape(*words.shape, 8).sum(axis=-1, dtype=np.uint8)


class _Block:
    """The rows of one day: capacity grows by doubling; a removed row is marked dead, not moved."""

    def __init__(self, dim: int, cap: int = 64):
        cap = max(64, cap)
        self.vecs = np.zeros((cap, dim), np.float32)
        self.codes = np.zeros(((dim + 63) // 64, cap), np.uint64)  # word-major: a word of every row in a run
        self.ids = np.zeros(cap, np.int64)
        self.asof = np.zeros(cap, np.int64)
        self.agents = np.zeros(cap, np.int32)
        self.alive = np.zeros(cap, bool)
        self.n = 0
        self.dead = 0
        self.lo = self.hi = 0  # as-of range of the rows ever added

    def append(self, rowid: int, vec: np.ndarray, asof: int, agent: int) -> int:
        if self.n == len(self.ids):
            cap = 2 * len(self.ids)
            self.vecs = np.resize(self.vecs, (cap, self.vecs.shape[1]))
            codes = np.zeros((self.codes.shape[0], cap), np.uint64)
            codes[:, :self.n] = self.codes[:, :self.n]
            self.codes = codes
            for name in ("ids", "asof", "agents", "alive"):
                setattr(self, name, np.resize(getattr(self, name), cap))
        r = self.n
        self.ids[r], self.alive[r] = rowid, True
        self.n += 1
        self.put(r, vec, asof, agent)
        return r

    def put(self, r: int, vec: np.ndarray, asof: int, agent: int) -> None:
        self.vecs[r], self.asof[r], self.agents[r] = vec, asof, agent
        self.codes[:, r] = sign_bits(vec)
        self.lo = asof if self.n == 1 else min(self.lo, asof)
        self.hi = asof if self.n == 1 else max(self.hi, asof)

    def eligible(self, as_of: int | None, agents: np.ndarray | None) -> np.ndarray | None:
        """Rows passing the filters (None: all n)."""
        mask = self.alive[:self.n] if self.dead else None
        if as_of is not None and self.hi > as_of:
            m = self.asof[:self.n] <= as_of
            mask = m if mask is None else mask & m
        if agents is not None:
            m = np.isin(self.agents[:self.n], agents)
            mask = m if mask is None else mask & m
        return None if mask is None else np.flatnonzero(mask)

    def best(self, q: np.ndarray, rows: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(similarities, ids) of the k best of `rows` (None: all) by exact cosine, unsorted."""
        sims = np.einsum("ij,j->i", self.vecs[:self.n] if rows is None else self.vecs[rows], q)
        idx = np.arange(self.n) if rows is None else rows
        if len(sims) > k:
            top = np.argpartition(-sims, k - 1)[:k]
            sims, idx = sims[top], idx[top]
        return sims, self.ids[idx]

    def hamming(self, qbits: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        codes = self.codes[:, :self.n] if rows is None else self.codes[:, rows]
        d = _popcount(codes[0] ^ qbits[0]).astype(np.int32)
        for j in range(1, len(codes)):  # word by word over contiguous runs: twice as fast as row by row
            d += _popcount(codes[j] ^ qbits[j])
        return d


class VectorMatrix:
    """Not thread-safe by itself: `VectorIndex` holds a lock around updates and searches."""

    def __init__(self, dim: int):
        self.dim = dim
        self.rev = -1  # store revision mirrored; -1: nothing loaded yet
        self.blocks: dict[int, _Block] = {}
        self.where: dict[int, tuple[int, int]] = {}  # id -> (block key, row)

    def __len__(self) -> int:
        return len(self.where)

    def nbytes(self) -> int:
        return sum(b.vecs.nbytes + b.ids.nbytes * 3 for b in self.blocks.values())

    def clear(self) -> None:
        self.blocks.clear()
        self.where.clear()
        self.rev = -1

    def load(self, rows: Iterable[tuple[int, bytes, int, int]]) -> None:
        """Fills an empty mirror at once (the rows of a whole table): vectorised, day by day."""
        rows = list(rows)
        if not rows:
            return
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        asof = np.fromiter((r[2] for r in rows), np.int64, len(rows))
        agents = np.fromiter((r[3] for r in rows), np.int32, len(rows))
        vecs = np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(len(rows), self.dim)
        vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        days = asof // DAY_MS
        for key in np.unique(days).tolist():
            sel = np.flatnonzero(days == key)
            b = self.blocks[key] = _Block(self.dim, len(sel))
            b.vecs[:len(sel)], b.codes[:, :len(sel)] = vecs[sel], sign_bits(vecs[sel]).T
            b.ids[:len(sel)], b.asof[:len(sel)], b.agents[:len(sel)] = ids[sel], asof[sel], agents[sel]
            b.alive[:len(sel)] = True
            b.n, b.lo, b.hi = len(sel), int(asof[sel].min()), int(asof[sel].max())
            self.where.update(zip(ids[sel].tolist(), ((key, r) for r in range(len(sel))), strict=True))

    def upsert(self, rows: Iterable[tuple[int, bytes | np.ndarray, int, int]]) -> None:
        """(id, float32 vector or its bytes, as-of ms, agent id) rows; an id already held is replaced."""
        for rowid, vec, asof, agent in rows:
            v = np.frombuffer(vec, np.float32) if isinstance(vec, bytes | bytearray | memoryview) else vec
            n = float(np.linalg.norm(v))
            v = v / n if n > 0 else v
            key = int(asof) // DAY_MS
            at = self.where.get(rowid)
            if at is not None and at[0] == key:  # re-embedded in its day (the usual live case): in place
                self.blocks[key].put(at[1], v, asof, agent)
                continue
            self.remove((rowid,))
            block = self.blocks.get(key)
            if block is None:
                block = self.blocks[key] = _Block(self.dim)
            self.where[rowid] = (key, block.append(rowid, v, asof, agent))

    def remove(self, ids: Iterable[int]) -> None:
        for rowid in ids:
            at = self.where.pop(rowid, None)
            if at is not None:
                b = self.blocks[at[0]]
                b.alive[at[1]] = False
                b.dead += 1
                if b.dead > 64 and b.dead > b.n // 2:
                    self._compact(at[0])

    def _compact(self, key: int) -> None:
        """Drops the dead rows of a block (units re-embedded into another day, or without text)."""
        old = self.blocks[key]
        live = np.flatnonzero(old.alive[:old.n])
        new = self.blocks[key] = _Block(self.dim)
        for r in live:
            self.where[int(old.ids[r])] = (key, new.append(int(old.ids[r]), old.vecs[r], int(old.asof[r]),
                                                          int(old.agents[r])))

    def search(self, query: np.ndarray, *, k: int, as_of: int | None = None,
               agents: Sequence[int] | None = None) -> list[tuple[int, float]]:
        """(id, cosine similarity), best first, among rows with as-of <= `as_of` of those agents."""
        if agents is not None and not agents:
            return []
        q = np.asarray(query, np.float32)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        wanted = np.array(sorted(set(agents)), np.int32) if agents is not None else None
        found = []  # (block, eligible rows or None for all)
        for block in self.blocks.values():
            if block.n == block.dead or (as_of is not None and block.lo > as_of):
                continue
            rows = block.eligible(as_of, wanted)
            if rows is None or len(rows):
                found.append((block, rows))
        total = sum(b.n if r is None else len(r) for b, r in found)
        if total > EXACT * RERANK * k:
            found = self._shortlist(q, found, RERANK * k)
        parts = [b.best(q, r, k) for b, r in found]
        if not parts:
            return []
        s, i = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        order = np.lexsort((i, -s))[:k]
        return [(int(i[j]), float(s[j])) for j in order]

    @staticmethod
    def _shortlist(q: np.ndarray, found: list, n: int) -> list:
        """The n rows nearest the query in Hamming distance of the sign bits, over all blocks."""
        qbits = sign_bits(q)
        dists = [b.hamming(qbits, r) for b, r in found]
        d = np.concatenate(dists)
        keep = np.zeros(len(d), bool)
        keep[np.argpartition(d, n - 1)[:n]] = True
        out, at = [], 0
        for (b, r), dist in zip(found, dists, strict=True):
            mine = np.flatnonzero(keep[at:at + len(dist)])
            at += len(dist)
            if len(mine):
                out.append((b, mine if r is None else r[mine]))
        return out
