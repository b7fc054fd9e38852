"""Settings of consolidation and answering, owned here and composed by `daemon.settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ConsolidationSettings(BaseModel):
    """How 10-minute windows become shared-memory events."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = Field(2500, ge=200, description="Observation tokens handed to the model per window.")
    max_events: int = Field(6, ge=1, le=20, description="Most events written for one window.")
    output_tokens: int = Field(700, ge=64, description="Most tokens the model may write per window.")


class AnswerSettings(BaseModel):
    """EgoMAS question answering: shared memory, planner, per-agent retrieval, responder."""

    model_config = ConfigDict(extra="forbid")

    shared_top_n: int = Field(20, ge=0, le=200, description="Events retrieved from shared memory (BM25).")
    shared_share: float = Field(
        0.25, ge=0, le=1, description="Most share of the answer's context the shared-memory events take, best first; "
        "the excerpts keep the rest (20 events took about 600 of 1,000 tokens, and every excerpt fell to its floor of "
        "40 tokens).")
    open_shared_share: float = Field(
        0.0, ge=0, le=1, description="The same for an open question (no options; 0: the responder is shown no events, "
        "which on every 3rd EgoLifeQA DAY1-2 question asked open gave 35 right of 80 against 29 at 0.25).")
    agent_top_k: int = Field(5, ge=1, le=50, description="Fine units kept per planned agent request.")
    score_threshold: float = Field(10.0, ge=0, description="Per-agent BM25 score below which a unit is dropped.")
    keep_best: bool = Field(
        True, description="Keep an agent's best unit even under the threshold (false: EgoMAS exactly)."
    )
    agent_search: Literal["hybrid", "egomas"] = Field(
        "hybrid", description="Per-agent search: the hybrid retriever, or EgoMAS's BM25 with the threshold below.")
    retrieve_top_k: int = Field(100, ge=1, description="Candidates searched before filtering to one agent.")
    fallback_top_k: int = Field(1000, ge=1, description="Candidates searched when the first pass finds too few.")
    planner: Literal["llm", "rule"] = Field(
        "rule", description="Who picks agents and sub-queries: 'rule' (the names in the question, its options and the "
        "events, and the asker for 'I'; no model call) or 'llm' (one more prompt for the model to read).")
    choose: Literal["generate", "letter", "cyclic", "likelihood", "pmi"] = Field(
        "cyclic", description="Multiple choice: generate the letter under the schema (with citations), or score "
        "the options without generating: 'letter' (the letters' probability as the next token), 'cyclic' (the "
        "same averaged over the options' cyclic orders, which cancels a leaning towards the first letter), "
        "'likelihood' "
        "(the mean log-probability of each option's words), 'pmi' (their log-probability less that without the "
        "evidence).")
    max_requests: int = Field(6, ge=1, le=20, description="Most agent requests a plan may make.")
    context_tokens: int = Field(
        1000, ge=256, description="Token budget of the context handed to the responder (1000: base answers in about "
        "14 s on 2 cores, as accurately as with 1200; EgoMAS used 4600).")
    open_context_tokens: int = Field(
        1400, ge=256, description="The same for an open question whose answer the model writes (all but 'who'): "
        "on 119 EgoLifeQA DAY1-2 questions asked open, 1400 answered as many right as 2000 (42, 8 gained and 8 "
        "lost) at 10.0 s p50 against 18.8 s on 2 cores (2000 against 1000 had gained 6 of the 108 such questions).")
    talk_span: bool = Field(
        True, description="An open question about what was said in a span of time that names no topic ('What were "
        "we talking about at lunch on DAY1?', 'What did we discuss this morning?') is shown the talk of that span, "
        "spread over it, instead of the lines that hold its words ('lunch' finds 'Are we providing lunch?').")
    talk_span_excerpts: int = Field(
        8, ge=1, le=30, description="Moments of talk shown for such a question: the span cut in this many equal "
        "parts, the moment with the most said in each.")
    filler_lines: int | None = Field(
        None, ge=0, description="Lines sharing no word with the question kept per excerpt besides those that do "
        "(None: fill each excerpt's share of the budget).")
    speech_once: bool = Field(
        True, description="Words several wearers heard in the same 30 s are shown once, in the best excerpt that has them.")
    rank_decay: float = Field(
        0.5, ge=0, le=4, description="An excerpt's share of the context falls as 1/rank^this (0: equal shares); "
        "what one leaves unused goes to those after it.")
    in_time_order: bool = Field(
        False, description="A question that asks an order ('first', 'last time'): the excerpts are shown to the "
        "model in time order (each keeps its number and its share of the context, which follow its rank). On the 78 "
        "such EgoLifeQA DAY1-2 questions: 39 right with and without it (the model alone 28 against 25).")
    name_wearer: bool = Field(
        True, description="In the excerpts, 'I' (我) of the wearer's own lines is written as the wearer's name.")
    vote_mentions: float = Field(
        0.1, ge=0, description="Multiple choice: weight of how much of each option's words the excerpts shown hold "
        "(standardised across the options) added to the model's log-probabilities (0: the model alone).")
    vote_lexical: float = Field(
        0.1, ge=0, description="Multiple choice: weight of the memory's best BM25 score for the question with each "
        "option, less the question's alone (standardised across the options).")
    vote_wearer: float = Field(
        0.0, ge=0, description="Multiple choice: weight of how much of the excerpts shown is "
        "the view of a person each option names (standardised across the options).")
    vote_timing: float = Field(
        0.25, ge=0, description="Multiple choice whose options are times ('About four hours ago', 'Last night'): "
        "weight of how near the excerpts shown lie to each option's time (standardised across the options).")
    vote_encounter: float = Field(
        0.0, ge=0, description="Multiple choice asking an order ('who used the screwdriver first'): weight of how "
        "early (or late) each option's people are seen with the question's object in the excerpts shown.")
    vote_dense: float = Field(
        0.0, ge=0, description="Multiple choice: weight of how near each option's sentence vector lies to the "
        "excerpts shown (the first encoder, any language; standardised across the options).")
    vote_dense_q: float = Field(
        0.0, ge=0, description="Multiple choice: as vote_dense, for the question followed by each option.")
    vote_dense_top: float = Field(
        0.0, ge=0, description="Multiple choice: weight of each option's cosine with its nearest excerpt shown.")
    open_who: Literal["generate", "likelihood", "pmi", "total"] = Field(
        "total", description="An open 'who' question: generate the answer, or score the people who may answer "
        "it (the wearers, the speakers shown) by their names' 'total' log-probability after the evidence (a name's "
        "own probability), 'likelihood' (mean per token: a name of two tokens such as ' T'+'asha' wins by its second "
        "token's certainty) or 'pmi', plus the evidence's vote (`who_*`), and name the best.")
    who_mentions: float = Field(
        0.5, ge=0, description="Open 'who' questions: weight of the excerpts' mentions of each person (as vote_mentions).")
    who_lexical: float = Field(
        1.0, ge=0, description="Open 'who' questions: weight of the memory's BM25 of the question with each person "
        "(as vote_lexical).")
    who_wearer: float = Field(
        0.0, ge=0, description="Open 'who' questions: weight of the excerpts seen through each person's eyes "
        "(as vote_wearer).")
    who_dense_q: float = Field(
        0.0, ge=0, description="Open 'who' questions: weight of how near the question with each name lies to the "
        "excerpts shown (as vote_dense_q).")
    who_companions: int = Field(
        2, ge=1, le=4, description="Open 'who' questions about company ('Who was I with ...?', 'Who did I eat with?'): "
        "how many of the best-scored people the answer names (1: the best alone).")
    asker_line: Literal["always", "when-asked"] = Field(
        "when-asked", description="When the prompt says who asks ('The asker is Jake: I, me, my mean Jake'): always, or "
        "only for a question that speaks in the first person or of 'us', or whose options name 'Me' (when-asked).")
    open_when: bool = Field(
        True, description="An open 'when' question is answered with the time of the excerpt that shares most of its "
        "words (the latest for 'the last time', the earliest for 'the first'), told relative to the question's time.")
    open_samples: int = Field(
        1, ge=1, le=8, description="An open answer the model writes: this many replies (the first greedy, the others "
        "sampled at open_temperature), and the one open_choose picks is shown (1: the greedy reply alone; no way of "
        "choosing among more beat it held out, tests/bench_samples.py).")
    open_temperature: float = Field(0.8, ge=0, le=2, description="Sampling temperature of the open replies after the first.")
    open_choose: Literal["agree", "support", "both", "pmi", "likelihood"] = Field(
        "support", description="Of several open replies: the one nearest the others (agree), the one nearest the excerpts "
        "shown (support), the sum of both, the one the evidence makes most likely against a prompt without it (pmi), "
        "or the one the model finds most likely (likelihood).")
    open_sentences: int = Field(
        1, ge=1, le=4, description="Most sentences of an open answer the model writes, as shown (the first that says "
        "something of its own, and those after it). 1: the base model's second sentence was mostly a caption or a "
        "line copied beside the answer ('Jake: Hahaha.'); on all 239 EgoLifeQA DAY1-2 questions asked open, 98 right "
        "against 93 with 2 (DAY1 +4, DAY2 +1, none lost).")
    answer_tokens: int = Field(160, ge=16, description="Most tokens of an open answer.")
    answer_chars: int = Field(300, ge=40, le=2000, description="Most characters of an open answer (in its schema).")
    repeat_penalty: float = Field(1.3, ge=1.0, le=2.0, description="Repetition penalty while answering.")
    merge_flat: bool = Field(
        True, description="Merge the flat hybrid search into the planned requests' units (false: EgoMAS's alone).")
    flat_share: float = Field(
        1.0, ge=0, le=1, description="Share of the budget the flat search's best units take first; the planned requests' "
        "units and the rest of the flat ones then take turns (1: the requests fill only what the flat search leaves, "
        "and are not searched when it fills the budget; on EgoLifeQA DAY1-2 with the events read by the planner, "
        "Hit@0 of the units handed over 56.5 against 48.1 at 0.5).")

    def weighs_meaning(self) -> bool:
        """Whether a reading of meaning (`vote.DenseReader`) has a weight in any vote."""
        return bool(self.vote_dense or self.vote_dense_q or self.vote_dense_top or self.who_dense_q)


class SearchSettings(BaseModel):
    """The parts of the default retriever, each switchable (`chorus bench` measures them off one by one)."""

    model_config = ConfigDict(extra="forbid")

    dense: bool = Field(True, description="Fuse sentence vectors (sqlite-vec) with BM25.")
    encoder: Literal["minilm", "use-multilingual"] = Field(
        "minilm", description="Sentence encoder of the dense index: 'minilm' (all-MiniLM-L6-v2, a unit's English lines "
        "only; measured best on EgoLifeQA DAY1-2) or 'use-multilingual' (Universal Sentence Encoder Multilingual v3, "
        "every line of a unit in any language). Each has its own vector tables; switching embeds the memory once.")
    second_encoder: Literal["", "minilm", "use-multilingual"] = Field(
        "use-multilingual", description="A second sentence encoder whose nearest units are fused beside the "
        "first's, at `second_dense_weight` ('': none). 'use-multilingual' beside MiniLM (the default) gives the "
        "Chinese-only memories (five of the six EgoLife wearers) a dense search while MiniLM keeps its English "
        "precision; its vectors are kept, and a backlog embedded, like the first's. Left at its default, it is "
        "dropped when `encoder` is the same model.")
    second_dense_weight: float = Field(0.3, ge=0, description="Weight of the second encoder's cosine (scaled 0..1 "
                                       "over its nearest units) against BM25's 1.")
    embedding_model: Path | None = Field(
        None, description="With encoder 'minilm': a sentence-transformers ONNX export (default: the bundled "
        "all-MiniLM-L6-v2 int8).")
    embedding_tokenizer: Path | None = Field(None, description="Its tokenizer.json (with embedding_model).")
    encoder_threads: int = Field(0, ge=0, le=512, description="CPU threads of the sentence encoder (0: all cores; "
                                 "MiniLM runs one single-thread session per thread, at most 8).")
    query_int8: bool = Field(True, description="With encoder 'minilm': embed questions with int8 MatMul weights "
                             "(made once into the model cache; about twice as fast, vectors at cosine 0.99 to float).")
    units_int8: bool = Field(True, description="With encoder 'minilm': embed units through the same int8 graph as "
                             "questions (about twice as fast; changing it re-embeds the memory once).")
    temporal: bool = Field(True, description="Read the question's time intent: soft range, latest/earliest/habit.")
    scales: bool = Field(True, description="Pool evidence over 10-minute and 1-hour windows.")
    context: bool = Field(True, description="A unit borrows part of its neighbours' score.")
    entities: bool = Field(True, description="Follow the question's key objects; rank by strict-to-loose match.")
    entity_memory: bool = Field(
        True, description="Follow the question's objects through their occasions in the order it asks (latest, "
        "earliest, one per day), and rank units by the people present in them (entity memory).")
    hierarchy: bool = Field(True, description="Matching shared-memory events lead to the best units of their window.")
    options_apart: bool = Field(True, description="Score each answer option with the question on its own.")
    dense_options: bool = Field(False, description="Put the answer options in the text of the question's vector "
                                "(off: the question alone; the options go to BM25).")
    translations: bool = Field(
        False, description="Add to BM25 the Chinese tokens the question's English words are translated with, learnt "
        "from the memory's own translated lines (`memory.glossary`): an English question finds untranslated lines.")
    chain_translations: bool = Field(
        True, description="The entity chain follows a key object in every language: its word or the translations the "
        "memory's glossary is sure of (screwdriver or 丝刀), so it reaches lines never translated.")
    translation_weight: float = Field(0.25, ge=0, description="Weight of a translation against its English word's "
                                      "(times how surely the glossary pairs them).")
    option_weight: float = Field(1.0, ge=0, description="Weight of an option's words against the question's.")
    name_option_share: float = Field(0.5, ge=0, description="Share of the option weight for people's names.")
    dense_weight: float = Field(0.3, ge=0, description="Weight of the dense score against BM25's 1 (0.3 with the "
                                "second encoder beside it: both folds of the leave-one-day-out search chose it).")
    window_weight: float = Field(0.3, ge=0, description="Weight of the 10-minute pooled score.")
    hour_weight: float = Field(0.2, ge=0, description="Weight of the 1-hour pooled score.")
    context_weight: float = Field(0.2, ge=0, description="Share of the best neighbour's score a unit borrows.")
    entity_weight: float = Field(0.1, ge=0, description="Bonus of a unit matching every key entity strictly.")
    entity_search_weight: float = Field(0.5, ge=0, description="Score of entity-only hits relative to BM25.")
    chain_weight: float = Field(0.2, ge=0, description="Bonus of a unit on the first occasion of the entity chain.")
    chain_slots: int = Field(2, ge=0, le=5, description="The key object's first encounters (in any language) handed "
                             "over whatever their score, in the order a \"first\" or \"last time\" question asks.")
    chain_seen: bool = Field(True, description="For \"the last time\" a thing was done (not said), the latest "
                             "encounters where a caption shows the object come before those where talk only names it.")
    people_weight: float = Field(0.1, ge=0, description="Bonus of a unit where every person the question names is present.")
    hierarchy_weight: float = Field(0.1, ge=0, description="Bonus of a unit inside the best matching event's window.")
    max_entities: int = Field(2, ge=1, le=6, description="Key entities taken from a question.")
    objects_only: bool = Field(True, description="Key entities are objects: words that say what was done or how "
                               "(saw, took, beside, next; `assistant.query.ACTION_WORDS`) are never one.")
    recency_weight: float = Field(0.0, ge=0, description="Extra weight of a moment just past, fading with age.")
    recency_hours: float = Field(6.0, gt=0, description="Hours over which the recency weight falls by e.")
    curation_floor: float = Field(0.5, ge=0, le=1, description="Share of the best score a curated unit needs.")
    curation_share: float = Field(0.2, ge=0, le=1, description="Share of the budget curated by time order.")
    widen: int = Field(1, ge=-1, le=1, description="Each unit handed over is joined by the same wearer's next 30 s "
                       "(1; -1: the 30 s before; 0: off), a fine unit of 60 s: the moment a question asks about "
                       "mostly follows the lines that match it best. On EgoLifeQA DAY1-2 with both encoders, Hit@0 "
                       "held out 62.3 against 57.3 (docs/figures.md, sixteenth round).")
    spread_minutes: float = Field(0.0, ge=0, le=1440, description="Spread the units over moments: the last "
                                  "`spread_share` of the budget goes to the best units at least this many minutes "
                                  "from every unit chosen before them (0: off).")
    spread_share: float = Field(0.3, ge=0, le=1, description="Share of the budget kept for new moments (with "
                                "spread_minutes).")

    @model_validator(mode="after")
    def _second_is_another(self) -> SearchSettings:
        if self.second_encoder and self.second_encoder == self.encoder:
            if "second_encoder" in self.model_fields_set:
                raise ValueError(f"second_encoder {self.second_encoder!r} is the encoder itself: name another, or '' "
                                 "for none")
            self.second_encoder = ""  # the default second encoder became the first: one encoder, no second
        return self
