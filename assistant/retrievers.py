"""The retrievers by name, sharing one set of indices: what `retrieve`, `bench` and answering use.

`default` is the hybrid retriever with every part on (as configured); `no-<part>` switches one
part off; `lexical` is BM25 alone (the previous default); `egomas-reference` the released EgoMAS.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from assistant.config import SearchSettings
from assistant.hybrid import HybridRetriever
from memory.clock import HouseClock
from memory.lexical import LexicalIndex
from memory.store import Store
from models.errors import ModelError

logger = logging.getLogger(__name__)
# part name -> its switch in `SearchSettings`
PARTS = {"dense": "dense", "temporal": "temporal", "scales": "scales", "context": "context",
         "entities": "entities", "options": "options_apart"}
NAMES = ("default", *(f"no-{p}" for p in PARTS), "lexical-only", "lexical", "egomas-reference")


class Retrievers:
    """Indices and the embedding model are opened once and shared by every variant."""

    def __init__(self, store: Store, clock: HouseClock, settings: SearchSettings, *,
                 embedder_factory: Callable[[], object] | None = None):
        self.store, self.clock, self.settings = store, clock, settings
        self.index = LexicalIndex(store)
        self._embedder_factory = embedder_factory
        self._embedder = None
        self._vectors = None
        self._broken = False
        self._event_vectors = None

    def dense_ok(self) -> bool:
        """Whether dense search is on and its model loads; a model that cannot load is logged once
        and the retrievers go on lexically rather than fail every question."""
        if not self.settings.dense or self._broken:
            return False
        try:
            self.vectors()
            return True
        except ModelError as e:
            logger.error("dense retrieval is off: %s", e)
            self._broken = True
            return False

    def vectors(self):
        """(VectorIndex, Embedder), built on first use; None when no embedder can be made."""
        if self._vectors is None:
            from memory.vectors import VectorIndex

            factory = self._embedder_factory or partial(_embedder, self.settings)
            self._embedder = factory()
            self._vectors = VectorIndex(self.store, self._embedder.embed, model=self._embedder.name,
                                        dim=self._embedder.dim)
        return self._vectors, self._embedder

    def prepare(self, progress: Callable[[int, str], Callable[[int], None]] | None = None, *,
                lexical: bool = True, stop: Callable[[], bool] | None = None, batch: int = 256) -> dict[str, int]:
        """Brings every index up to date, embedding any backlog (a first run over an imported week
        takes minutes on 2 cores); `progress(total, name)` gives a callback per embedded batch."""
        if lexical:
            self.index.refresh()
        done: dict[str, int] = {}
        if not self.dense_ok():
            return done
        seg, _ = self.vectors()
        for vi in (seg, self.event_vectors()):
            tick = progress(vi.pending(), vi.source.name) if progress else None
            done[vi.source.name] = vi.refresh(tick, stop=stop, batch=batch)
        return done

    def event_vectors(self):
        from memory.lexical import EVENTS
        from memory.vectors import VectorIndex

        if self._event_vectors is None:
            _, e = self.vectors()
            self._event_vectors = VectorIndex(self.store, e.embed, model=e.name, dim=e.dim, source=EVENTS,
                                              view=lambda t: t)
        return self._event_vectors

    def make(self, name: str):
        if name == "egomas-reference":
            from assistant.egomas import EgoMASReference

            return EgoMASReference(self.store)
        if name == "lexical":
            from assistant.lexical import LexicalRetriever

            return LexicalRetriever(self.store, self.index)
        if name not in NAMES:
            raise KeyError(name)
        s = self.settings
        if name.startswith("no-"):
            s = s.model_copy(update={PARTS[name[3:]]: False})
        elif name == "lexical-only":
            s = s.model_copy(update=dict.fromkeys(PARTS.values(), False))
        vectors, embedder = self.vectors() if s.dense and self.dense_ok() else (None, None)
        r = HybridRetriever(self.store, self.clock, s, index=self.index, vectors=vectors, embedder=embedder)
        r.name = name
        if vectors is not None:
            r.event_vectors = self.event_vectors()
        return r


def _embedder(s: SearchSettings):
    from models.embed import Embedder

    return Embedder(s.embedding_model, s.embedding_tokenizer)
