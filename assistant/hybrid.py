"""The default retriever: lexical and dense candidates, fused, then re-scored by time, scale and entity.

Each part can be switched off (`retrieval.*` settings; `chorus bench` runs the ablation):
- dense: cosine of a sentence encoder (`retrieval.encoder`: multilingual USE over every line of a
  segment, or MiniLM over its English lines) in sqlite-vec, fused with BM25 by normalised scores
  (the best of each list scores 1);
- temporal: the question's intended range as a soft relevance, and its order (latest, earliest,
  spread over days) as a curation of part of the budget (EgoCITE);
- scales: evidence pooled over 10-minute and 1-hour windows of all agents: a 30-second unit in a
  stretch where much matches outranks an isolated match (multi-scale memory);
- context: a unit borrows part of its neighbours' score (the extractive form of self-contained
  units: "it" and "that one" are resolved by the lines around them);
- entities: the question's key objects and people are followed to their other encounters by a
  second, entity-only search, and a unit is ranked by how strictly it matches them (all entities,
  with the people named, in the intended range; then relaxed step by step) (EGAgent, GEB).
"""

from __future__ import annotations

import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import numpy as np

from assistant import chains
from assistant.chains import chain_order, chain_scores, first_encounters, hierarchy_scores, presence
from assistant.config import SearchSettings
from assistant.fusion import Columns, entity_levels, fuse, relevance, score_all
from assistant.lexical import LexicalRetriever
from assistant.query import ACTION_WORDS, Query, Retrieved, person_name, speaks_of_self
from assistant.selection import Cand, new_moments, round_robin_by_day
from assistant.temporal import CUE_WORDS, Intent, read_intent
from memory.clock import HouseClock
from memory.entities import EntityMemory, person_key
from memory.events import EventStore
from memory.glossary import Glossary
from memory.lexical import LexicalIndex
from memory.records import SEGMENT_MS, Unit, joined
from memory.store import Store
from memory.tokenize import query_tokens, tokenize

POOL = 200  # BM25 candidates per query (400 cost 0.6 and 0 points of Hit@0 on DAY1, DAY2)
DENSE_POOL = 400  # nearest vectors: 200 more than BM25 gave +1.2 and +1.5 Hit@0 on DAY1 and DAY2 (800: DAY1 lost 0.6)
_ENCODING = ThreadPoolExecutor(1, thread_name_prefix="query-encoder")  # one question's vector at a time
INLINE_EMBED = 256  # units a question may wait to have embedded (about 3 s on 2 cores)
RECENT_GAP_MS = 10 * 60_000  # "the last time" means an earlier occasion, not the one under way
CUE_TOKENS = frozenset(t for w in CUE_WORDS for t in tokenize(w))
ACTION_TOKENS = frozenset(t for w in ACTION_WORDS for t in tokenize(w))


class HybridRetriever:
    name = "default"

    def __init__(self, store: Store, clock: HouseClock, settings: SearchSettings, *, index: LexicalIndex | None = None,
                 vectors=None, embedder=None, event_vectors=None, name: str = "default",
                 pool_cache: dict | None = None, entities: EntityMemory | None = None,
                 event_index: LexicalIndex | None = None, glossary: Glossary | None = None, second=None):
        """`pool_cache` (optional, shared by variants that differ only in weights applied after the
        candidates are gathered: the weight search of `chorus bench --loo`) keeps each question's
        candidates, so a variant re-scores them instead of searching again. `second`: (vectors,
        encoder) of `retrieval.second_encoder`, searched beside the first."""
        self.store, self.clock, self.s, self.name = store, clock, settings, name
        self.lexical = LexicalRetriever(store, index, glossary=glossary,
                                        cross_lingual=settings.translation_weight if settings.translations else 0.0)
        self.index = self.lexical.index
        self.vectors, self.embedder, self.event_vectors = vectors, embedder, event_vectors
        self.second = second
        self.pool_cache = pool_cache
        self.entities, self.event_index = entities, event_index
        self._names: set[str] | None = None

    # -- candidates ---------------------------------------------------------------------
    def refresh(self) -> None:
        """Before a question: the lexical index, and the vectors when only a few units are new (a
        larger backlog is embedded by `Retrievers.prepare` or the daemon's background indexer)."""
        self.index.refresh()
        if self.lexical.glossary is not None:
            self.lexical.glossary.refresh()
        if self.s.entity_memory and self.entities is not None:
            self.entities.refresh()
        if self.s.dense and self.vectors is not None:
            self.vectors.refresh(limit=INLINE_EMBED)
        if self.s.dense and self.second is not None:
            self.second[0].refresh(limit=INLINE_EMBED)

    def people(self) -> set[str]:
        if self._names is None:
            self._names = {t for a in self.store.agents().values() for t in query_tokens(person_name(a))}
        return self._names

    def _pool(self, q: Query, intent: Intent, agents, dense: tuple[Future | None, Future | None]) -> dict[int, Cand]:
        """`dense`: the question's vectors being made, by the first encoder and the second
        (`_dense_queries_soon`: the encoders run, GIL released, while BM25 does)."""
        cands: dict[int, Cand] = {}
        for hits in self.index.search_many(self._lexical_queries(q), k=POOL, as_of=q.as_of_ms, agents=agents):
            for i, sc in hits:
                c = cands.setdefault(i, Cand(None))  # type: ignore[arg-type]
                c.lex = max(c.lex, sc)
        if self.s.entities:
            # follow the key objects to their other encounters: an entity-only search, in range first
            for i, sc in self._entity_search(q, intent, agents):
                c = cands.setdefault(i, Cand(None))  # type: ignore[arg-type]
                c.lex = max(c.lex, sc * self.s.entity_search_weight)
        self._ways_in(q, intent, agents, cands)
        spans = self._spans(list(cands))  # these while the question's vector is still being made
        for future, vectors, field in ((dense[0], self.vectors, "dense"),
                                       (dense[1], self.second[0] if self.second else None, "dense2")):
            if future is None or vectors is None:
                continue
            for qv in future.result():
                for i, sim in vectors.search(qv, k=DENSE_POOL, as_of=q.as_of_ms, agents=agents):
                    c = cands.setdefault(i, Cand(None))  # type: ignore[arg-type]
                    setattr(c, field, max(getattr(c, field), sim))
        if any(f is not None for f in dense):
            spans |= self._spans([i for i in cands if i not in spans])
        self._people(q, cands)
        for i, c in cands.items():
            c.unit = spans.get(i)  # type: ignore[assignment]
        return {i: c for i, c in cands.items() if c.unit is not None}

    def _spans(self, ids: list[int]) -> dict[int, Unit]:
        """The candidates as units without text (ranking needs agent and time; the chosen few are
        read in full at the end), from the lexical index in memory; SQL for any it lacks."""
        names = self.store.agents()
        out = {i: Unit(i, names[a], s, s + SEGMENT_MS, "") for i, (a, s) in self.index.spans(ids).items()}
        missing = [i for i in ids if i not in out]
        return out | self.store.spans(missing) if missing else out

    def _ways_in(self, q: Query, intent: Intent, agents, cands: dict[int, Cand]) -> None:
        """Candidates by the entity chain and the events above the units."""
        if self.s.entity_memory and self.entities is not None:
            order = chain_order(q.question, intent)
            day = lambda ms: self.clock.day_of(ms)[0]  # noqa: E731
            groups = self.entity_groups(q)
            latest = order == "latest" and self.s.chain_seen
            seen = chains.seen_reader(self.store.units, groups, q.question) if latest else None
            for i, sc in chain_scores(self.index, groups, q, order, agents, day, seen).items():
                cands.setdefault(i, Cand(None)).chain = sc  # type: ignore[arg-type]
            for k, i in enumerate(first_encounters(self.index, groups[0] if groups else (), q, order, agents,
                                                   int(self.s.chain_slots), seen), 1):
                cands.setdefault(i, Cand(None)).first = k  # type: ignore[arg-type]
        if self.s.hierarchy and self.event_index is not None:
            weights = self.lexical.weights(replace(q, options=()))
            for i, sc in hierarchy_scores(self.index, self.event_index, EventStore(self.store), weights, q,
                                          agents).items():
                cands.setdefault(i, Cand(None)).hier = sc  # type: ignore[arg-type]

    def _people(self, q: Query, cands: dict[int, Cand]) -> None:
        if self.s.entity_memory and self.entities is not None:
            for i, sc in presence(self.entities, list(cands), self.named(q)).items():
                cands[i].people = sc

    def named(self, q: Query) -> set[str]:
        """The people a question names, as the entity memory keeps them."""
        if self.entities is None:
            return set()
        named = {w.lower() for w in re.findall(r"[A-Za-z]+", q.question)} & self.entities.known()
        if q.asker and speaks_of_self(q.question):  # "who was with me": the asker was there too
            named.add(person_key(q.asker))
        return named

    def _lexical_queries(self, q: Query) -> list[dict[str, float]]:
        """One weighted query; with `options_apart`, one per option (question + that option), so
        a unit is scored by the option it supports best rather than by all four at once."""
        if not self.s.options_apart or not any(q.options):
            return [self.lexical.weights(q)]
        out = []
        for o in q.options:
            if o:
                w = self.lexical.weights(replace(q, options=()), translate=False)
                for t in query_tokens(o):
                    w[t] = w.get(t, 0.0) + self.s.option_weight * (self.s.name_option_share if t in self.people() else 1.0)
                out.append(self.lexical.translated(w))
        return out

    def shared_events(self, q: Query, lexical: list[tuple[int, float]], k: int) -> list[tuple[int, float]]:
        """Shared-memory events: the BM25 hits fused with the nearest event vectors."""
        if not (self.s.dense and self.event_vectors is not None and self.embedder is not None):
            return lexical[:k]
        self.event_vectors.refresh(limit=INLINE_EMBED)
        dense = self.event_vectors.search(self._dense_queries(q)[0], k=k, as_of=q.as_of_ms)
        return fuse(lexical, dense, self.s.dense_weight)[:k]

    def _dense_queries_soon(self, q: Query) -> tuple[Future | None, Future | None]:
        """`_dense_queries` of the first encoder and the second started in a worker thread (None
        for one that is off)."""
        if not self.s.dense:
            return None, None
        first = _ENCODING.submit(self._dense_queries, q) if self.vectors is not None and self.embedder is not None else None
        second = _ENCODING.submit(self._dense_queries, q, self.second[1]) if self.second is not None else None
        return first, second

    def _dense_queries(self, q: Query, embedder=None) -> list:
        """One vector for the question; its options go to BM25, one query each. With the options in
        the vector's text (`retrieval.dense_options`) EgoLifeQA DAY1-2 lost 1.2 and 2.9 points of
        Hit@5min (DAY1, DAY2; Hit@0 equal) and the encoder read twice the tokens; a vector per
        option costs a search each and gained 0.4 points of Hit@0."""
        opts = [o for o in q.options if o] if self.s.dense_options else []
        embedder = embedder or self.embedder
        embed = getattr(embedder, "embed_query", embedder.embed)
        return [embed([q.question + ("\n" + " / ".join(opts) if opts else "")])[0]]

    def key_entities(self, q: Query) -> list[str]:
        """The question's rarest content words that are not people: the objects it is about."""
        toks = [t for t in dict.fromkeys(query_tokens(q.question)) if t not in self.people() and len(t) > 1
                and t not in CUE_TOKENS and (t not in ACTION_TOKENS or not self.s.objects_only)]
        ranked = sorted(toks, key=lambda t: -self.index.idf(t))
        return [t for t in ranked if self.index.idf(t) > 0][: self.s.max_entities]

    def entity_groups(self, q: Query) -> list[tuple[str, ...]]:
        """Each key entity with the translations the memory's glossary is sure of: "screwdriv" or
        丝刀, so an object's chain holds its encounters in every language (Alice's 用螺丝刀戳破了
        was never translated)."""
        if not self.s.chain_translations:
            return [(e,) for e in self.key_entities(q)]
        return [(e, *sorted(self.lexical.same_words(e))) for e in self.key_entities(q)]

    def _entity_search(self, q: Query, intent: Intent, agents) -> list[tuple[int, float]]:
        ents = self.key_entities(q)
        if not ents:
            return []
        w = dict.fromkeys(ents, 1.0)
        hits = []
        if intent.ranged:
            hits = self.index.search(w, k=POOL // 2, as_of=q.as_of_ms, agents=agents, start_ms=intent.lo,
                                     end_ms=intent.hi)
        return hits + self.index.search(w, k=POOL // 2, as_of=q.as_of_ms, agents=agents)

    # -- scoring ------------------------------------------------------------------------
    def _score(self, q: Query, intent: Intent, cands: dict[int, Cand]) -> None:
        """Every candidate's score (assistant/fusion.py: the steps, with numpy) and entity level."""
        cs = list(cands.values())
        if not cs:
            return
        wearers: dict[str, int] = {}
        m = np.array([(c.unit.id, wearers.setdefault(c.unit.agent, len(wearers)), c.unit.start_ms, c.unit.end_ms,
                       c.lex, c.dense, c.chain, c.people, c.hier, c.dense2) for c in cs],
                     dtype=np.float64)  # exact: < 2**53
        ints = m[:, :4].astype(np.int64)
        c = Columns(ints[:, 0], ints[:, 1], ints[:, 2], ints[:, 3], *(m[:, k] for k in range(4, 9)),
                    dense2=m[:, 9] if self.second is not None else None)
        levels = self._entity_levels(q, intent, c) if self.s.entities else None
        for cand, v in zip(cs, score_all(c, self.s, intent, q.as_of_ms, levels).tolist(), strict=True):
            cand.score = v
        if levels is not None:
            for cand, lv in zip(cs, levels.tolist(), strict=True):
                cand.level = lv

    def _entity_levels(self, q: Query, intent: Intent, c: Columns) -> np.ndarray | None:
        """Strict to loose (assistant/fusion.py, step 2); None when the question has no key entity."""
        ents = list(dict.fromkeys(self.key_entities(q)))
        named = list(dict.fromkeys(t for t in query_tokens(q.question) if t in self.people()))
        if not ents:
            return None
        having = {t: self.index.containing(t) for t in {*ents, *named}}
        in_range = relevance(intent, c.start) == 1.0 if intent.ranged else np.ones(len(c.ids), dtype=bool)
        return entity_levels(c, ents, named, having, in_range, self.s.entity_memory and self.entities is not None)

    # -- selection ----------------------------------------------------------------------
    def retrieve(self, q: Query) -> Retrieved:
        t0 = time.perf_counter()
        agents = self.lexical.agent_ids(q.agents)
        key = (q.question, q.options, q.asker, q.as_of_ms, tuple(agents) if agents is not None else None)
        cands = self.pool_cache.get(key) if self.pool_cache is not None else None
        # the encoders first: the longest part
        dense = self._dense_queries_soon(q) if cands is None else (None, None)
        self.refresh()
        intent = read_intent(q.question, q.as_of_ms, self.clock) if self.s.temporal else Intent()
        if cands is None:
            cands = self._pool(q, intent, agents, dense)
            if self.pool_cache is not None:
                self.pool_cache[key] = cands
        self._score(q, intent, cands)
        ranked = sorted(cands.values(), key=lambda c: (-c.score, c.unit.start_ms))
        chosen = self._select(ranked, intent, q)
        full = self.store.units([c.unit.id for c in chosen])
        units = [replace(full[c.unit.id], score=round(c.score, 4)) for c in chosen if c.unit.id in full]
        if self.s.widen:
            units = self._widened(units, int(self.s.widen), q.as_of_ms)
        notes = {"intent": list(intent.cues), "entities": self.key_entities(q) if self.s.entities else []}
        return Retrieved(units, {"retrieval": (time.perf_counter() - t0) * 1000}, notes)

    def _widened(self, units: list[Unit], step: int, as_of_ms: int) -> list[Unit]:
        """Each unit with the same wearer's next 30 s (`step` 1; the 30 s before with -1) joined to
        it, a fine unit of 60 s: the moment a question asks about mostly follows the lines that
        match it best. Not when that 30-s slot is among the units already (any wearer's: selection
        keeps one unit a slot). `extra["core"]` keeps the text the search chose (the evidence's
        vote, `assistant.vote.mentions`, reads that)."""
        taken = {u.start_ms for u in units}
        nxt = self.store.beside(units, step, as_of_ms)
        out = []
        for u in units:
            n = nxt.get(u.id)
            if n is None or n.start_ms in taken:
                out.append(u)
            else:
                both = joined(u, n) if step > 0 else joined(n, u)
                out.append(replace(both, id=u.id, score=u.score, extra={**u.extra, "core": u.text}))
        return out

    def _first_encounters(self, ranked: list[Cand], intent: Intent, q: Query) -> list[Cand]:
        """The key object's first `chain_slots` encounters in the order the question asks (the
        earliest for "first", the latest for "last time"; `chains.first_encounters`): the object's
        own encounter is the answer's evidence even where nothing else in it matches the question
        (Alice's 用螺丝刀戳破了 has no English line)."""
        return sorted((c for c in ranked if 0 < c.first <= int(self.s.chain_slots)), key=lambda c: c.first)

    def _select(self, ranked: list[Cand], intent: Intent, q: Query) -> list[Cand]:
        """Best first, one unit per 30-second slot; with an order intent, part of the budget goes to
        the strong candidates taken in that order (latest, earliest, one per day)."""
        budget, out, slots = q.budget, [], set()

        def take(c: Cand) -> None:
            if c.unit.start_ms not in slots and len(out) < budget:
                slots.add(c.unit.start_ms)
                out.append(c)

        for c in self._first_encounters(ranked, intent, q):
            take(c)
        if self.s.temporal and intent.order and ranked:
            floor = ranked[0].score * self.s.curation_floor
            strong = [c for c in ranked if c.score >= floor]
            if intent.order == "latest":
                strong = [c for c in strong if c.unit.start_ms < q.as_of_ms - RECENT_GAP_MS] or strong
                strong.sort(key=lambda c: -c.unit.start_ms)
            elif intent.order == "earliest":
                strong.sort(key=lambda c: c.unit.start_ms)
            else:
                strong = round_robin_by_day(strong, self.clock)
            for c in strong[: int(budget * self.s.curation_share)]:
                take(c)
        spread = int(round(budget * self.s.spread_share)) if self.s.spread_minutes > 0 else 0
        if spread:  # the best first, then the rest of the budget to other moments
            for c in ranked:
                if len(out) >= budget - spread:
                    break
                take(c)
            for c in new_moments(ranked, budget - len(out), self.s.spread_minutes * 60_000, out):
                take(c)
        for c in ranked:
            take(c)
        return sorted(out, key=lambda c: -c.score)

