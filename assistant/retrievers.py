"""The retrievers by name, sharing one set of indices: what `retrieve`, `bench` and answering use.

`default` is the hybrid retriever with every part on (as configured); `no-<part>` switches one
part off (`no-second`: the second encoder, `retrieval.second_encoder`; `no-widen`: units of 30 s, not
joined to the next 30 s, `retrieval.widen`); `lexical` is BM25 alone (the previous default); `egomas-reference` the released EgoMAS.
A hybrid name may end in `@<encoder>` (`default@minilm`) to use that sentence encoder instead of
the configured one: each encoder has its own vector tables, so both are measured in one run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from assistant.config import SearchSettings
from assistant.hybrid import HybridRetriever
from memory.clock import HouseClock
from memory.entities import EntityMemory
from memory.glossary import Glossary
from memory.lexical import EVENTS, LexicalIndex
from memory.store import Store
from memory.tokenize import MULTILINGUAL_VIEW, english_view, multilingual_view
from memory.vectors import BATCH, VectorIndex
from models.errors import ModelError

logger = logging.getLogger(__name__)
# part name -> its switch in `SearchSettings`
PARTS = {"dense": "dense", "temporal": "temporal", "scales": "scales", "context": "context",
         "entities": "entities", "options": "options_apart", "entity-memory": "entity_memory",
         "hierarchy": "hierarchy", "chain-translations": "chain_translations", "objects-only": "objects_only",
         "chain-seen": "chain_seen"}
NAMES = ("default", *(f"no-{p}" for p in PARTS), "no-second", "no-widen", "lexical-only", "lexical", "egomas-reference")
# encoder -> the key of its vector tables ('' = the tables MiniLM has always used)
ENCODERS = {"use-multilingual": "use", "minilm": ""}


def known(name: str) -> bool:
    """A retriever name, optionally `@encoder` for the hybrid ones."""
    base, _, enc = name.partition("@")
    return base in NAMES and (not enc or (enc in ENCODERS and base not in ("lexical", "egomas-reference")))


class Retrievers:
    """Indices and the embedding models are opened once and shared by every variant."""

    def __init__(self, store: Store, clock: HouseClock, settings: SearchSettings, *,
                 embedder_factory: Callable[[], object] | None = None,
                 lend: Callable[[str], object] | None = None):
        """`embedder_factory` builds the configured encoder, `lend(name)` any encoder (the daemon
        hands the serving retrievers' loaded ones to its background indexer this way); other
        encoders are built from the settings."""
        self.store, self.clock, self.settings = store, clock, settings
        self.index = LexicalIndex(store)
        self.event_index = LexicalIndex(store, EVENTS)
        self.entities = EntityMemory(store)
        self._glossary: Glossary | None = None  # read or learnt only with `translations` or `chain_translations` on
        self._embedder_factory = embedder_factory
        self._lend = lend
        self._dense: dict[str, tuple[VectorIndex, VectorIndex, object]] = {}
        self._broken: set[str] = set()

    def glossary(self) -> Glossary:
        """The memory's glossary (`memory.glossary`), opened on first use."""
        if self._glossary is None:
            self._glossary = Glossary(self.store)
        return self._glossary

    def dense_ok(self, encoder: str | None = None) -> bool:
        """Whether dense search is on and its model loads; a model that cannot load is logged once
        and the retrievers go on lexically rather than fail every question."""
        encoder = encoder or self.settings.encoder
        if not self.settings.dense or encoder in self._broken:
            return False
        try:
            self._open(encoder)
            return True
        except ModelError as e:
            logger.error("dense retrieval with %s is off: %s", encoder, e)
            self._broken.add(encoder)
            return False

    def _open(self, encoder: str) -> tuple[VectorIndex, VectorIndex, object]:
        """(segment vectors, event vectors, encoder), built on first use."""
        if encoder not in self._dense:
            if encoder == self.settings.encoder and self._embedder_factory is not None:
                e = self._embedder_factory()
            elif self._lend is not None:
                e = self._lend(encoder)
            else:
                e = make_encoder(self.settings, encoder)
            key = ENCODERS[encoder]
            multi = getattr(e, "languages", "en") != "en"
            model = f"{e.name}+view{MULTILINGUAL_VIEW}" if multi else e.name
            seg = VectorIndex(self.store, e.embed, model=model, dim=e.dim, key=key,
                              view=multilingual_view if multi else english_view)
            ev = VectorIndex(self.store, e.embed, model=model, dim=e.dim, source=EVENTS, key=key, view=lambda t: t)
            self._dense[encoder] = (seg, ev, e)
        return self._dense[encoder]

    def vectors(self, encoder: str | None = None):
        """(segment VectorIndex, encoder) of the configured encoder or the one named."""
        seg, _, e = self._open(encoder or self.settings.encoder)
        return seg, e

    def event_vectors(self, encoder: str | None = None) -> VectorIndex:
        return self._open(encoder or self.settings.encoder)[1]

    def prepare(self, progress: Callable[[int, str], Callable[[int], None]] | None = None, *,
                lexical: bool = True, stop: Callable[[], bool] | None = None, batch: int = BATCH,
                encoders: tuple[str, ...] = (), step: int | None = None) -> dict[str, int]:
        """Brings every index up to date, embedding any backlog (a first run over an imported week
        takes minutes on 2 cores); `progress(total, name)` gives a callback per embedded batch.
        `encoders`: those to prepare besides the configured one. `batch`: rows embedded and committed
        at a time; `stop` is asked between them (the daemon's indexer passes a small one, so that it
        stops and yields quickly); 1,024 embedded the week in 11-13 % less time than 256 (each batch is
        sorted by length, and a larger one pads less and leaves a core idle less often at its end).
        `step`: the vector indices take turns, about `step` rows each, so that every encoder's
        vectors advance through the backlog together, oldest first (the daemon's catch-up: without
        turns, the second encoder, the only one that reads Chinese lines, started on the first day
        only once the first encoder had done the whole week)."""
        if lexical:
            self.index.refresh()
        self.entities.refresh()  # the daemon's background indexer keeps it up to date for questions
        if self.settings.translations or self.settings.chain_translations:
            self.glossary().learn_if_due()
        done: dict[str, int] = {}
        indices = self._to_embed(encoders)
        ticks: dict[str, Callable[[int], None]] = {}
        while indices:
            for vi in indices:
                if progress and vi.name not in ticks:
                    ticks[vi.name] = progress(vi.pending(), vi.name)
                done[vi.name] = done.get(vi.name, 0) + vi.refresh(ticks.get(vi.name), stop=stop, batch=batch,
                                                                  most=step)
            if step is None or (stop and stop()):
                break
            indices = [vi for vi in indices if vi.pending()]
        return done

    def _to_embed(self, encoders: tuple[str, ...]) -> list:
        """The vector indices that `prepare` keeps up to date, the configured encoder's first."""
        out = []
        second = self.settings.second_encoder
        for enc in dict.fromkeys((self.settings.encoder, *((second,) if second else ()), *encoders)):
            if not self.dense_ok(enc):
                continue
            seg, ev, _ = self._open(enc)
            # a second encoder searches the units only: the events are found by the first
            only_units = enc == second and enc != self.settings.encoder and enc not in encoders
            out += [seg] if only_units else [seg, ev]
        return out

    def make(self, name: str, overrides: dict | None = None, pool_cache: dict | None = None):
        """The retriever of that name; `overrides` set `SearchSettings` fields (the weight search
        of `chorus bench --loo`), `pool_cache` lets variants share candidate pools."""
        if name == "egomas-reference":
            from assistant.egomas import EgoMASReference

            return EgoMASReference(self.store)
        if name == "lexical":
            from assistant.lexical import LexicalRetriever

            return LexicalRetriever(self.store, self.index)
        if not known(name):
            raise KeyError(name)
        base, _, encoder = name.partition("@")
        encoder = encoder or self.settings.encoder
        s = self.settings.model_copy(update=overrides or {})
        if base.startswith("no-") and base[3:] in PARTS:
            s = s.model_copy(update={PARTS[base[3:]]: False})
        elif base == "lexical-only":
            s = s.model_copy(update=dict.fromkeys(PARTS.values(), False))
        if base in ("no-second", "lexical-only"):
            s = s.model_copy(update={"second_encoder": ""})
        if base in ("no-widen", "lexical-only"):
            s = s.model_copy(update={"widen": 0})
        seg = ev = e = second = None
        if s.dense and self.dense_ok(encoder):
            seg, ev, e = self._open(encoder)
        if s.dense and s.second_encoder and s.second_encoder != encoder and self.dense_ok(s.second_encoder):
            vectors, _, encoder2 = self._open(s.second_encoder)
            second = (vectors, encoder2)
        return HybridRetriever(self.store, self.clock, s, index=self.index, vectors=seg, embedder=e,
                               event_vectors=ev, name=name, pool_cache=pool_cache, entities=self.entities,
                               event_index=self.event_index,
                               glossary=self.glossary() if s.translations or s.chain_translations else None, second=second)


def make_encoder(s: SearchSettings, encoder: str):
    """The sentence encoder of that name (`retrieval.encoder`)."""
    if encoder == "use-multilingual":
        from models.multilingual import MultilingualEncoder

        return MultilingualEncoder(threads=s.encoder_threads)
    from models.embed import Embedder

    return Embedder(s.embedding_model, s.embedding_tokenizer, threads=s.encoder_threads, query_int8=s.query_int8,
                    units_int8=s.units_int8)
