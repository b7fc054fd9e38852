"""Answering: shared memory -> planner -> per-agent units -> responder, citing its evidence.

The same `Answerer` serves MQTT, the chat, `chorus ask` and the benchmark. Switches give the
EgoMAS ablation: without shared memory the planner and the responder see no events; without
dynamic retrieval the units are the flat top units of all agents. With `search` settings the
retrieval is the hybrid one (`assistant.hybrid`); without, EgoMAS's BM25 alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from assistant import guard, people, samples, talk, vote, when
from assistant.agentwise import MemorySearch
from assistant.config import AnswerSettings, SearchSettings
from assistant.context import fit_events, fit_units, supporting
from assistant.frames import FrameFinder
from assistant.guard import EXTRACTIVE, MODEL, NOT_FOUND_MODE, TIMED, Reply, check_open, extractive, unseen
from assistant.letters import LETTERS, can_score, cyclic_letters
from assistant.planner import Request, merge, plan, round_robin
from assistant.prompts import (
    ANSWER_AGAIN,
    ANSWER_CHOICE,
    ANSWER_OPEN,
    ANSWER_PREFIX,
    ANSWER_STOP,
    ANSWER_SYSTEM,
    OPEN_MIN_CHARS,
    answer_open_what,
    answer_schema,
)
from assistant.query import Query, person_name, speaks_of_group, speaks_of_self
from assistant.retrievers import Retrievers
from assistant.temporal import read_intent
from memory.clock import HouseClock
from memory.events import Event
from memory.frames import FrameStore
from memory.records import Unit
from memory.store import Store
from memory.tokenize import estimate_tokens, query_tokens
from models.errors import ModelError
from models.llm import HIGH, LocalLLM, ModelCutShort, ModelLooping, Usage
from models.scoring import log_softmax, score_choices


@dataclass
class Gathered:
    events: list[Event]
    units: list[Unit]
    requests: list[Request] = field(default_factory=list)
    planner: str = "none"
    timings_ms: dict[str, float] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)


@dataclass
class Answer:
    question: str
    answer: str
    choice: str | None
    evidence: list[Unit]
    cited: bool
    gathered: Gathered
    context_tokens: int
    timings_ms: dict[str, float]
    usage: Usage
    status: str = "ok"
    error: str = ""
    frames: list = field(default_factory=list)  # (Frame, why, distance) shown with the answer
    mode: str = MODEL  # model | extractive (the reply was unusable) | not_found | timed | quoted (talk of a span)
    guard: str | None = None  # why the model's reply was not shown as it was
    reply: str | None = None  # the model's own words when they were not shown
    scores: dict | None = None  # multiple choice by scoring: each reading's log-probabilities, picks, seconds


class Answerer:
    def __init__(
        self, store: Store, clock: HouseClock, settings: AnswerSettings, llm: LocalLLM | None = None, *,
        shared: bool = True, dynamic: bool = True, budget: int = 15, planner: str | None = None,
        search: SearchSettings | None = None, retrievers: Retrievers | None = None,
        frames: FrameFinder | None = None,
    ):
        hybrid = None
        if search is not None or retrievers is not None:
            retrievers = retrievers or Retrievers(store, clock, search)
            hybrid = retrievers.make("default")
        self.search = MemorySearch(store, settings, hybrid)
        self.clock, self.settings, self.llm = clock, settings, llm
        self.shared, self.dynamic, self.budget = shared, dynamic, budget
        self.planner = planner or settings.planner
        self.frames = frames or FrameFinder(FrameStore(store))  # the daemon's has its embedder
        self.dense = vote.DenseReader(h.embedder) if (h := self.search.hybrid) and h.embedder is not None else None
        self.also_score, self.all_readings = False, False  # the benchmark's: every way of choosing, every reading

    # -- retrieval ----------------------------------------------------------------------
    def gather(self, q: Query, planner: str | None = None) -> Gathered:
        t0 = time.perf_counter()
        self.search.refresh()
        events = self.search.shared(q) if self.shared else []
        t1 = time.perf_counter()
        timings = {"shared": (t1 - t0) * 1000}
        s = self.settings
        flat = self.search.flat.retrieve(replace(q, budget=self.budget)).units if s.merge_flat or not self.dynamic else []
        t2 = time.perf_counter()
        if not self.dynamic:
            timings["retrieval"] = (t2 - t1) * 1000
            return Gathered(events, flat, timings_ms=timings)
        # the requests are searched only when their units can be shown (the flat search leaves room);
        # when it fills the budget, no model is asked for a plan either (the rule planner costs nothing)
        filled = s.merge_flat and len(flat) >= self.budget and round(self.budget * s.flat_share) >= self.budget
        requests, planner, usage = plan(
            "rule" if filled else planner or self.planner, self.llm, q, events, self.events_text(events),
            self.search.agents(q), s.max_requests,
        )
        t3 = time.perf_counter()
        per_request = [] if filled else [self.search.for_agent(r, q) for r in requests]
        units = merge(flat, per_request, self.budget, s.flat_share) if s.merge_flat else round_robin(per_request,
                                                                                                     self.budget)
        timings.update(planning=(t3 - t2) * 1000, retrieval=(t2 - t1 + time.perf_counter() - t3) * 1000)
        return Gathered(events, units, requests, planner, timings, usage)

    def span(self, q: Query) -> tuple[int, int] | None:
        """The span of a question about what was said in it that names no topic (`assistant.talk`)."""
        return talk.span_of(q, read_intent(q.question, q.as_of_ms, self.clock), self.names() | guard.GENERIC) \
            if self.settings.talk_span else None

    def span_talk(self, q: Query, span: tuple[int, int]) -> Gathered | None:
        """A question about what was said in a span of time that names no topic ("What were we talking
        about at lunch on DAY1?"): the talk of the span, spread over it (`talk.across`), instead of the
        lines that hold the question's words; None for a span with no talk."""
        t0 = time.perf_counter()
        said = [u for u in self.search.store.between(*span, q.as_of_ms) if not q.agents or u.agent in q.agents]
        units = talk.across(said, *span, self.settings.talk_span_excerpts, q.asker,
                            talk.named(q, self.search.agents(q)))
        return Gathered([], units, planner="span", timings_ms={"shared": 0.0, "planning": 0.0, "retrieval": (
            time.perf_counter() - t0) * 1000}) if units else None

    def events_text(self, events: list[Event]) -> str:
        return "\n".join(
            f"[{self.clock.label(e.start_ms)[:-3]}-{self.clock.label(e.end_ms)[-8:-3]}] {e.text()}" for e in events
        )

    # -- answering ----------------------------------------------------------------------
    def answer(self, q: Query, shown: Callable[[list[Unit], list[Event]], None] | None = None) -> Answer:
        """`shown(units, events)`: told what the model is given, before it reads (a page shows it)."""
        choices = tuple(LETTERS[i] for i, o in enumerate(q.options[:4]) if o)
        self.search.refresh()
        gone = unseen(q, lambda t: self.search.segments.idf(t) > 0, self.names())
        span = None if choices or gone else self.span(q)
        g = self.span_talk(q, span) if span else None
        span = span if g else None  # a span where nothing was said is searched as any question
        g = g or self.gather(q, "rule" if gone else None)  # nothing for a model to plan about a thing never seen
        count = self.llm.count if self.llm else estimate_tokens
        written = not choices and not people.asks_who(q.question)  # the model writes it (not a scored name)
        budget = self.settings.open_context_tokens if written else self.settings.context_tokens
        share = self.settings.shared_share if choices else self.settings.open_shared_share
        events = fit_events(g.events, round(budget * share), lambda e: count(self.events_text([e])))
        events_text = self.events_text(events)
        units, excerpts = self.fit(g.units, q, budget - count(events_text), count, span is not None)
        if shown is not None:
            shown(units, events)
        context = (f"Shared memory:\n{events_text}\n\n" if events_text else "") + f"Excerpts:\n{excerpts}"
        t0 = time.perf_counter()
        usage = Usage()
        usage.add(g.usage)
        if gone or not (units or (choices and events)):  # nothing to read: no model can say more (nor guess)
            why = f"never seen: {', '.join(gone)}" if gone else "no evidence"
            r = Reply(extractive(units, q, self.clock.label, found=False), mode=NOT_FOUND_MODE, guard=why)
        elif span and (quoted := talk.span_sentence(units, *span, self.clock.label,
                                                     speakers=talk.named(q, self.search.agents(q))))[0]:
            r = Reply(quoted[0], None, quoted[1], mode=guard.QUOTED)  # a few of the span's turns, no model
        elif self.llm is None:
            raise ModelError("answering needs a model")
        else:
            r = self.respond(q, units, context, choices, usage)
        timings = dict(g.timings_ms, answering=(time.perf_counter() - t0) * 1000)
        evidence = [units[i - 1] for i in r.cites] or units[:3]
        return Answer(q.question, r.text, r.choice, evidence, bool(r.cites), replace(g, units=units, events=events),
                      count(context),
                      timings, usage, r.status, r.error, self.frames.find(q, evidence), r.mode, r.guard, r.raw,
                      r.scores)

    def respond(self, q: Query, units: list[Unit], context: str, choices: tuple[str, ...], usage: Usage) -> Reply:
        """The model's reply under the schema, checked: an open answer that degenerates is replaced
        by an extractive one, one that the evidence does not bear out by "I don't find this"."""
        s = self.settings
        system = ANSWER_SYSTEM  # the fixed head first (the prompt cache keeps it); all that varies after
        ask = self.ask(q, tuple(range(len(choices))))

        def messages_for(order: tuple[int, ...]) -> list[dict]:
            return [{"role": "system", "content": system},
                    {"role": "user", "content": f"{context}\n\n{self.ask(q, order)}"}]

        messages = messages_for(tuple(range(len(choices))))
        scoring = bool(choices) and can_score(self.llm)
        if scoring and s.choose != "generate":
            return self.score(q, units, messages_for, choices, usage)
        who = not choices and people.asks_who(q.question)
        if not choices and s.open_when and when.asks_when(q.question):
            sure = self.search.lexical.sure  # "cherries" read in 樱桃 too
            if (u := when.moment(units, q, self.clock, self.search.segments.idf, sure)) is not None:
                return Reply(when.sentence(u, q, self.clock, sure), None, [units.index(u) + 1], mode=TIMED)
        if who and s.open_who != "generate" and can_score(self.llm):
            names = people.candidates(q, self.search.agents(q), units)
            if len(names) >= 2:
                return self.person(q, units, messages, names, usage)
        scored = self.score(q, units, messages_for, choices, usage, both=True) if scoring and self.also_score else None
        prompt = f"{system}\n{ask}"
        r = self.generate(q, units, messages, choices, usage, who, prompt, scored, fresh=scored is None)
        if not choices:  # more replies drawn, the one `open_choose` picks shown (`assistant.samples`)
            r = samples.best_of(r, lambda i: self.generate(q, units, messages, choices, usage, who, prompt, None, draw=i),
                                s.open_samples, self.dense, units, q.question, s.open_choose, (self.llm, messages, usage))
        if choices or r.mode != EXTRACTIVE:
            return r
        # an unusable open reply is asked for once more, in the model's own words (only that is new to the model)
        again_ask = answer_open_what(q.question, ANSWER_AGAIN)
        again = [*messages[:-1], {**messages[-1], "content": f"{messages[-1]['content']}\n{again_ask}"}]
        second = self.generate(q, units, again, choices, usage, who, prompt, None)
        return replace(second, guard=f"asked again: {r.guard}", raw=r.raw) if second.mode == MODEL else r

    def generate(self, q: Query, units: list[Unit], messages: list[dict], choices: tuple[str, ...], usage: Usage,
                 who: bool, prompt: str, scored: Reply | None, fresh: bool = False, draw: int = 0) -> Reply:
        """One reply of the model under the answer's schema, checked (`check_open` for an open one);
        `fresh`: the question's first call of the model (`LocalLLM.json`); `draw` > 0: a sampled reply."""
        s = self.settings
        try:
            shortest = 1 if choices or who else OPEN_MIN_CHARS
            reply, u = self.llm.json(messages, answer_schema(len(units), choices, s.answer_chars, shortest),
                                     max_tokens=s.answer_tokens, priority=HIGH, repeat_penalty=s.repeat_penalty,
                                     stop=ANSWER_STOP, stop_loops=True, fresh=fresh,
                                     **({"temperature": s.open_temperature, "seed": draw} if draw else {}))
        except (ModelLooping, ModelCutShort) as e:
            if choices:
                return Reply("", status="error", error=str(e))
            guard = "repeated" if isinstance(e, ModelLooping) else "cut short"
            return Reply(extractive(units, q, self.clock.label), mode=EXTRACTIVE, guard=guard)
        except ModelError as e:
            return Reply("", status="error", error=str(e))
        usage.add(u)
        cites = [i for i in dict.fromkeys(reply.evidence) if 1 <= i <= len(units)]
        if choices:
            return Reply(f"{reply.choice}. {q.options[LETTERS.index(reply.choice)]}", reply.choice, cites,
                         scores=scored.scores if scored else None)
        return check_open(reply.answer, q, units, cites, prompt, self.clock.label, s.open_sentences)

    def ask(self, q: Query, order: tuple[int, ...]) -> str:
        """The question as the model reads it, the options listed in `order` (indices of q.options)."""
        said = self.settings.asker_line == "always" or speaks_of_self(" ".join((q.question, *q.options))) \
            or speaks_of_group(q.question)
        asker = (f"The asker is {person_name(q.asker)}: 'I', 'me', 'my' in the question mean "
                 f"{person_name(q.asker)}.\n") if q.asker and said else ""
        options = "".join(f"\n{LETTERS[k]}. {q.options[i]}" for k, i in enumerate(order))
        return f"{asker}Question (asked at {self.clock.label(q.as_of_ms)}): {q.question}{options}\n" + (
            ANSWER_CHOICE if order else ANSWER_OPEN if people.asks_who(q.question) else answer_open_what(q.question))

    def score(self, q: Query, units: list[Unit], messages_for: Callable[[tuple[int, ...]], list[dict]],
              choices: tuple[str, ...], usage: Usage, both: bool = False) -> Reply:
        """Multiple choice without generating: the options scored after the evidence (`models.scoring`);
        the evidence shown with it is the excerpts that share most words with the chosen option.
        `both`: every reading (the benchmark's comparison; the prompt is then in the model's state for
        the generation that follows)."""
        choose, n = self.settings.choose, len(choices)
        options = [q.options[LETTERS.index(c)] for c in choices]
        try:
            sc, u = score_choices(self.llm, messages_for(tuple(range(n))), ANSWER_PREFIX, list(choices), options,
                                  with_options=both or choose not in ("letter", "cyclic"), fresh=True)
            # after: the prompt is in the model's state, only the options are read again
            cyclic = cyclic_letters(self.llm, messages_for, n, sc.letters) if both or choose == "cyclic" else None
        except ModelError as e:
            return Reply("", status="error", error=str(e))
        picks = {by: choices[sc.pick(by)] for by in ("letter", "likelihood", "pmi") if by == "letter" or sc.options}
        if cyclic is not None:
            picks["cyclic"] = choices[int(np.argmax(cyclic[0]))]
            u.seconds += cyclic[1]
        if not both:  # the comparison's pass is reported apart (its seconds in `scores`)
            usage.add(u)
        readings = self.readings(q, units, options)
        own = {"letter": sc.letters, "likelihood": sc.options, "pmi": sc.pmi, "cyclic": cyclic[0] if cyclic else None}
        c = self.vote(picks, choices, own.get(choose) or sc.letters, readings)
        option = q.options[LETTERS.index(c)]
        return Reply(f"{c}. {option}", c, supporting(units, option, q.question, self.also(q)),
                     scores={"letter": sc.letters, "likelihood": sc.options, "pmi": sc.pmi, "picks": picks,
                             "cyclic": cyclic[0] if cyclic else None,
                             "cyclic_seconds": round(cyclic[1], 3) if cyclic else None, "seconds": round(u.seconds, 3),
                             "evidence": {k: [round(float(x), 4) for x in v] for k, v in readings.items()}})

    def person(self, q: Query, units: list[Unit], messages: list[dict], names: list[str], usage: Usage) -> Reply:
        """An open "who" question: the people scored (`assistant.people`), the best named with the
        time of the excerpt that bears them out."""
        s = self.settings
        weights = {"mentions": s.who_mentions, "lexical": s.who_lexical, "wearer": s.who_wearer, "dense_q": s.who_dense_q}
        try:
            name, scores, u = people.pick(self.llm, messages, ANSWER_PREFIX, names,
                                          lambda ns: self.readings(q, units, ns), weights, s.open_who)
        except ModelError as e:
            return Reply("", status="error", error=str(e))
        usage.add(u)
        named = scores["ranked"][: s.who_companions] if people.asks_companions(q.question) else [name]
        cites = supporting(units, " ".join(named), q.question, self.also(q))
        top = units[cites[0] - 1] if cites else None
        return Reply(people.sentence(named, top if top and people.shows(top, name) else None, q, self.clock.label),
                     None, cites, scores=scores)

    def vote(self, picks: dict, choices: tuple[str, ...], own: list[float], readings: dict[str, np.ndarray]) -> str:
        """The choice: the model's scores of the configured reading plus the evidence's vote
        (`assistant.vote`); when it votes, `picks` gains the evidence's pick alone and the joint one."""
        s = self.settings
        weights = {"mentions": s.vote_mentions, "lexical": s.vote_lexical, "timing": s.vote_timing,
                   "wearer": s.vote_wearer, "encounter": s.vote_encounter,
                   "dense": s.vote_dense, "dense_q": s.vote_dense_q, "dense_top": s.vote_dense_top}
        if not any(weights.values()):  # the model alone (the evidence's pick would be "A" for want of weights)
            return picks.get(s.choose, picks["letter"])
        picks["evidence"] = choices[int(np.argmax(vote.combined(None, readings, weights)))]
        model = log_softmax(np.asarray(own[: len(choices)], dtype=np.float64))
        picks["voted"] = choices[int(np.argmax(vote.combined(model, readings, weights)))]
        return picks["voted"]

    def readings(self, q: Query, units: list[Unit], options: list[str]) -> dict[str, np.ndarray]:
        """How the evidence backs each option (`assistant.vote`): the excerpts shown, the whole memory."""
        lex = self.search.lexical
        base = lex.weights(replace(q, options=()), translate=False)
        named = [vote.as_asker(o, q.asker) for o in options]
        weigh = self.dense and (self.all_readings or self.settings.weighs_meaning())  # read where it counts
        return {**(self.dense(units, q.question, named) if weigh else {}),
                "mentions": vote.mentions(units, q.question, named, translations=lex.translations_of),
                "wearer": vote.wearer(units, named),
                "lexical": vote.lexical(self.search.segments, base, named, q.as_of_ms, lex.translated),
                "timing": vote.timing(units, options, q.as_of_ms, self.clock),
                "encounter": vote.encounter(units, named, *self.search.object_of(q), self.names())}

    def names(self) -> set[str]:
        return {t for a in self.search.agents() for t in query_tokens(person_name(a))}

    def fit(self, units: list[Unit], q: Query, budget: int, count, span: bool = False) -> tuple[list[Unit], str]:
        """The units cut to the budget, best first; the talk of a span (`span_talk`) in time order, each
        moment an equal share."""
        s = self.settings
        ordered = span or s.in_time_order and read_intent(q.question, q.as_of_ms, self.clock).order in ("earliest",
                                                                                                         "latest")
        return fit_units(units, q, budget, count, self.clock.label, None if span else s.filler_lines, s.speech_once,
                         0.0 if span else s.rank_decay, s.name_wearer, self.also(q), ordered)

    def also(self, q: Query) -> set[str]:
        """Words that count as the question's in the lines shown and cited: the translations the
        memory's glossary is sure of."""
        return self.search.lexical.same_words(" ".join((q.question, *q.options)))
