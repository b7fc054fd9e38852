"""The retrievers by name, sharing one set of indices: what `retrieve`, `bench` and answering use.

`default` is the hybrid retriever with every part on (as configured); `no-<part>` switches one
part off; `lexical` is BM25 alone (the previous default); `egomas-reference` the released EgoMAS.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from assistant.config import SearchSettings
from assistant.hybrid import HybridRetriever
from memory.clock import HouseClock
from memory.lexical import LexicalIndex
from memory.store import Store

logger = logging.getLogger(__name__)
PARTS = ("dense", "temporal", "scales", "context", "entities")
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

    def vectors(self):
        """(VectorIndex, Embedder), built on first use; None when no embedder can be made."""
        if self._vectors is None:
            from memory.vectors import VectorIndex

            factory = self._embedder_factory or _bundled_embedder
            self._embedder = factory()
            self._vectors = VectorIndex(self.store, self._embedder.embed, model=self._embedder.name,
                                        dim=self._embedder.dim)
        return self._vectors, self._embedder

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
            s = s.model_copy(update={name[3:]: False})
        elif name == "lexical-only":
            s = s.model_copy(update=dict.fromkeys(PARTS, False))
        vectors, embedder = self.vectors() if s.dense else (None, None)
        r = HybridRetriever(self.store, self.clock, s, index=self.index, vectors=vectors, embedder=embedder)
        r.name = name
        return r


def _bundled_embedder():
    from models.embed import Embedder

    return Embedder()
