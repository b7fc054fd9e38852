"""A glossary learned from the memory's own translations: each English word, the Chinese tokens
its lines are translated with.

Most of the EgoLife memory is Chinese; the questions are English. Speech lines (and one wearer's
captions) come in pairs, the Chinese line and its English translation at the same moment. Across
a week's 358k pairs the words align by themselves: "screwdriver" goes with 丝刀 (Dice 0.90),
"microwave" with 波炉 (0.99), "lunch" with 中午 (0.54). A question's English words, with these
tokens added at a lower weight, reach the lines that were never translated: the captions of the
other wearers. No model and no dictionary: what the memory holds is what it learns, in any pair
of languages whose lines are stored in pairs.

Learnt from the newest `MAX_ROWS` Chinese and English observations and kept beside the database
(`learn_if_due`: by `chorus index` and the daemon's background indexer, again when the memory has
grown by a quarter); a question only reads what was learnt (`refresh`), and learns it itself only
when there is none yet.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from memory.shards import write_json
from memory.store import Store
from memory.tokenize import has_cjk, tokenize

logger = logging.getLogger(__name__)

VERSION = "1"
MAX_ROWS = 1_200_000  # the newest observations read (the week: 1.02M, 10 s)
MIN_COUNT = 3  # an English word seen in fewer pairs is not learnt
KEEP = 3  # tokens kept per word
FLOOR = 0.15  # the least Dice coefficient kept
USE = 0.3  # the least Dice coefficient a query uses
SURE = 0.5  # a translation counted as the word itself (screwdriv: 丝刀 0.90, 有磁 0.39): the chain, the lines shown
GROW = 1.25  # rebuilt when the memory has grown by this factor


class Glossary:
    """English token -> [(Chinese token, Dice coefficient)], best first."""

    def __init__(self, store: Store, folder: str | Path | None = None, *, persist: bool = True):
        """`persist` false: nothing is read from or written to disk (a read-only memory)."""
        self.store = store
        base = Path(folder) if folder else (None if store.path == ":memory:" else Path(store.path + ".index"))
        self.path = base / "glossary.json" if base and persist else None
        self.terms: dict[str, list[tuple[str, float]]] = {}
        self.built_at = -1  # the largest observation id read
        self._seen: tuple | None = None  # the saved file's (mtime, inode, size) when last read or written
        self._load()

    def refresh(self) -> bool:
        """Before a question: what another process learnt since; learnt here only when there is
        none at all (a rebuild takes 10 s at week scale: not a question's to wait for)."""
        self._load()
        return self.learn_if_due() if self.built_at < 0 else False

    def learn_if_due(self) -> bool:
        """Learn again when the memory has grown by a quarter, or is another memory (fewer rows
        than were read), or nothing was learnt yet; True if learnt."""
        self._load()
        top = self.store.db.execute("SELECT COALESCE(MAX(id), 0) FROM observations").fetchone()[0]
        if 0 <= self.built_at <= top < max(self.built_at * GROW, self.built_at + 1):
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

    def translations(self, token: str, floor: float = USE) -> set[str]:
        """The tokens `expand` adds for this one."""
        return {zh for zh, dice in self.terms.get(token, ()) if dice >= floor and zh != token}

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
        """The saved glossary, when the file changed since it was last read or written here."""
        try:
            st = self.path.stat() if self.path else None
        except OSError:
            return
        seen = (st.st_mtime_ns, st.st_ino, st.st_size) if st else None
        if seen is None or seen == self._seen:
            return
        self._seen = seen
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("version") == VERSION:
                self.terms = {k: [(z, float(d)) for z, d in v] for k, v in data["terms"].items()}
                self.built_at = int(data["built_at"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            logger.warning("glossary at %s unreadable (%s): it is learnt again", self.path, e)

    def _save(self) -> None:
        if self.path is None:
            return
        try:
            write_json(self.path, {"version": VERSION, "built_at": self.built_at, "terms": self.terms})
            st = self.path.stat()
            self._seen = (st.st_mtime_ns, st.st_ino, st.st_size)
        except OSError as e:
            logger.warning("glossary not saved to %s: %s", self.path, e)


def learn(pairs: list[tuple[str, str]]) -> dict[str, list[tuple[str, float]]]:
    """Dice coefficients of (English token, Chinese token) over the pairs' token sets."""
    en: dict[str, int] = {}
    zh: dict[str, int] = {}
    ei, ej, zi, zj = [], [], [], []
    for k, (z, e) in enumerate(pairs):
        for t in dict.fromkeys(tokenize(e)):  # first-seen order, not a set's: the same on every run
            if not has_cjk(t):
                ej.append(en.setdefault(t, len(en)))
                ei.append(k)
        for t in dict.fromkeys(tokenize(z)):
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
    en_words, zh_words = list(en), list(zh)
    # ties (common in a small memory) go to the longer token, then the first in code-point order
    longer = -np.array([len(z) for z in zh_words])
    order = np.empty(len(zh_words), dtype=np.int64)
    order[np.argsort(np.array(zh_words))] = np.arange(len(zh_words))
    out: dict[str, list[tuple[str, float]]] = {}
    for r, i in enumerate(keep):
        lo, hi = C.indptr[r], C.indptr[r + 1]
        cols, both = C.indices[lo:hi], C.data[lo:hi]
        dice = np.round(2 * both / (ce[i] + cz[cols]), 3)
        best = np.lexsort((order[cols], longer[cols], -dice))[:KEEP]
        kept = [(zh_words[cols[j]], float(dice[j])) for j in best if dice[j] >= FLOOR]
        if kept:
            out[en_words[i]] = kept
    return out
