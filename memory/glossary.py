"""A glossary learned from the memory's own translations: each English word, the Chinese tokens
its lines are translated with.

Most of the EgoLife memory is Chinese; the questions are English. Speech lines (and one wearer's
captions) come in pairs, the Chinese line and its English translation at the same moment. Across
a week's 358k pairs the words align by themselves: "screwdriver" goes with 丝刀 (Dice 0.90),
"microwave" with 波炉 (0.99), "lunch" with 中午 (0.54). A question's English words, with these
tokens added at a lower weight, reach the lines that were never translated: the captions of the
other wearers. No model and no dictionary: what the memory holds is what it learns, in any pair
of languages whose lines are stored in pairs.

Built from the newest `MAX_ROWS` observations, persisted beside the database, rebuilt when the
memory has grown by a quarter since (`refresh`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from memory.store import Store
from memory.tokenize import has_cjk, tokenize

logger = logging.getLogger(__name__)

VERSION = "1"
MAX_ROWS = 1_200_000  # the newest observations read (the week: 1.02M, 10 s)
MIN_COUNT = 3  # an English word seen in fewer pairs is not learnt
KEEP = 3  # tokens kept per word
FLOOR = 0.15  # the least Dice coefficient kept
USE = 0.3  # the least Dice coefficient a query uses
GROW = 1.25  # rebuilt when the memory has grown by this factor


class Glossary:
    """English token -> [(Chinese token, Dice coefficient)], best first."""

    def __init__(self, store: Store, folder: str | Path | None = None):
        self.store = store
        base = Path(folder) if folder else (None if store.path == ":memory:" else Path(store.path + ".index"))
        self.path = base / "glossary.json" if base else None
        self.terms: dict[str, list[tuple[str, float]]] = {}
        self.built_at = -1  # the largest observation id read
        self._mtime: int | None = None
        self._load()

    def refresh(self) -> bool:
        """Rebuild when the memory has grown by a quarter (or was never read); True if rebuilt."""
        self._load()  # another process (the daemon's indexer) may have learnt it since
        top = self.store.db.execute("SELECT COALESCE(MAX(id), 0) FROM observations").fetchone()[0]
        if self.built_at >= 0 and top < max(self.built_at * GROW, self.built_at + 1):
            return False
        t0 = time.perf_counter()
        self.terms = learn(self._pairs())
        self.built_at = top
        self._save()
        logger.info("glossary learnt: %d English words from the memory's translations in %.1fs",
                    len(self.terms), time.perf_counter() - t0)
        return True

    def expand(self, weights: Mapping[str, float], share: float, floor: float = USE) -> dict[str, float]:
        """`weights` with each English token's translations added at `share` x Dice x its weight
        (a token reached by several words keeps the largest)."""
        out = dict(weights)
        if share <= 0:
            return out
        added: dict[str, float] = {}
        for t, w in weights.items():
            for zh, dice in self.terms.get(t, ()):
                if dice >= floor and zh not in weights:
                    added[zh] = max(added.get(zh, 0.0), share * dice * w)
        out.update(added)
        return out

    def _pairs(self) -> list[tuple[str, str]]:
        """(Chinese line, English line) stored at the same moment by the same agent, same kind."""
        rows = self.store.db.execute(
            """SELECT agent_id, kind, start_ms, lang, text FROM (
                   SELECT id, agent_id, kind, start_ms, lang, text FROM observations
                   WHERE lang IN ('zh', 'en') ORDER BY id DESC LIMIT ?)
               ORDER BY agent_id, kind, start_ms, id""", (MAX_ROWS,)).fetchall()
        return [(a[4], b[4]) for a, b in zip(rows, rows[1:], strict=False)
                if a[:3] == b[:3] and a[3] == "zh" and b[3] == "en"]

    def _load(self) -> None:
        """The saved glossary, when it changed on disk since it was last read or written here."""
        try:
            mtime = self.path.stat().st_mtime_ns if self.path else None
        except OSError:
            return
        if mtime is None or mtime == self._mtime:
            return
        self._mtime = mtime
        try:
            data = json.loads(self.path.read_text())
            if data.get("version") == VERSION:
                self.terms = {k: [(z, float(d)) for z, d in v] for k, v in data["terms"].items()}
                self.built_at = int(data["built_at"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            logger.warning("glossary at %s unreadable (%s): it is learnt again", self.path, e)

    def _save(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"version": VERSION, "built_at": self.built_at, "terms": self.terms},
                                      ensure_ascii=False))
            tmp.replace(self.path)
            self._mtime = self.path.stat().st_mtime_ns
        except OSError as e:
            logger.warning("glossary not saved to %s: %s", self.path, e)


def learn(pairs: list[tuple[str, str]]) -> dict[str, list[tuple[str, float]]]:
    """Dice coefficients of (English token, Chinese token) over the pairs' token sets."""
    en: dict[str, int] = {}
    zh: dict[str, int] = {}
    ei, ej, zi, zj = [], [], [], []
    for k, (z, e) in enumerate(pairs):
        for t in set(tokenize(e)):
            if not has_cjk(t):
                ej.append(en.setdefault(t, len(en)))
                ei.append(k)
        for t in set(tokenize(z)):
            if has_cjk(t):
                zj.append(zh.setdefault(t, len(zh)))
                zi.append(k)
    if not ei or not zi:
        return {}
    n = len(pairs)
    E = sp.csr_matrix((np.ones(len(ei), np.float32), (ei, ej)), shape=(n, len(en)))
    Z = sp.csr_matrix((np.ones(len(zi), np.float32), (zi, zj)), shape=(n, len(zh)))
    ce, cz = np.asarray(E.sum(0)).ravel(), np.asarray(Z.sum(0)).ravel()
    keep = np.flatnonzero(ce >= MIN_COUNT)
    C = (E[:, keep].T @ Z).tocsr()
    en_words, zh_words = list(en), np.array(list(zh))
    out: dict[str, list[tuple[str, float]]] = {}
    for r, i in enumerate(keep):
        lo, hi = C.indptr[r], C.indptr[r + 1]
        cols, both = C.indices[lo:hi], C.data[lo:hi]
        dice = 2 * both / (ce[i] + cz[cols])
        near = np.argsort(-dice, kind="stable")[: 4 * KEEP]
        # ties (common in a small memory) go to the longer token, then the same way on every run
        scored = sorted((-round(float(dice[j]), 3), -len(zh_words[cols[j]]), str(zh_words[cols[j]])) for j in near)
        kept = [(z, -d) for d, _, z in scored[:KEEP] if -d >= FLOOR]
        if kept:
            out[en_words[i]] = kept
    return out
