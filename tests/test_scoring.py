"""Multiple choice by likelihood (`models.scoring`) through the real bundled model, and the
benchmark's open-mode scorer through the real MiniLM."""

import math
from typing import Literal

import pytest

from assistant.answer import Answerer
from assistant.bench import languages, nearest_option
from assistant.config import AnswerSettings, SearchSettings
from assistant.context import supporting
from assistant.query import Query
from memory.records import Unit
from memory.store import Store
from models.scoring import score_choices

pytestmark = pytest.mark.slow
SYSTEM = "You answer questions using only the evidence given."
ASK = ("Evidence:\nThe kettle is on the balcony. Jake put it there at noon.\n\n"
       "Question: Where is the kettle?\nA. in the kitchen\nB. on the balcony\nC. in the car\nD. under the bed\n"
       "Choose the letter of the right option.")
OPTIONS = ["in the kitchen", "on the balcony", "in the car", "under the bed"]


def mean_logprob(llama, toks, cont):
    """The continuation's mean log-probability, evaluated from scratch with every position's logits."""
    import numpy as np

    llama.n_tokens = 0
    total = 0.0
    for t in [*toks, *cont][:-1]:
        llama.eval([t])
    llama.n_tokens = 0
    llama.eval(toks)
    for t in cont:
        x = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).astype(np.float64)
        total += x[t] - x.max() - np.log(np.exp(x - x.max()).sum())
        llama.eval([t])
    return total / len(cont)


MODEL_ALONE = {"vote_mentions": 0.0, "vote_lexical": 0.0, "vote_timing": 0.0}  # the model's reading, no vote

def test_options_are_scored_after_one_reading_of_the_prompt(tiny_llm):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ASK}]
    s, u = score_choices(tiny_llm, messages, "Answer:", list("ABCD"), OPTIONS)
    assert len(s.letters) == len(s.options) == len(s.pmi) == 4
    assert all(lp < 0 for lp in s.letters) and sum(math.exp(lp) for lp in s.letters) <= 1.0
    # the options' words read the same whether scored or evaluated as one continuation
    toks = tiny_llm.prompts.tokens(messages)[0] + tiny_llm.llama.tokenize(b"Answer:", add_bos=False, special=False)
    cont = tiny_llm.llama.tokenize(b" on the balcony", add_bos=False, special=False)
    assert s.options[1] == pytest.approx(mean_logprob(tiny_llm.llama, toks, cont), abs=0.05)
    # the total is the option's own log-probability: the mean times its tokens, below the mean when
    # it has several
    assert len(cont) > 1 and s.totals[1] == pytest.approx(s.options[1] * len(cont), abs=1e-6)
    assert s.totals[1] < s.options[1]
    assert u.prompt_tokens > 50 and u.completion_tokens == 0
    s, _ = score_choices(tiny_llm, messages, "Answer:", list("ABCD"), OPTIONS)  # after the check above
    again, u2 = score_choices(tiny_llm, messages, "Answer:", list("ABCD"), OPTIONS, with_options=False)
    assert again.letters == pytest.approx(s.letters, abs=1e-3) and again.options == again.pmi == again.totals == []
    # the prompt without evidence is read first, the real one last: it is still in the model's state
    assert u2.cached_tokens >= u2.prompt_tokens - 1
    # a generation after the scoring still works on the same state
    from pydantic import BaseModel

    class Pick(BaseModel):
        choice: Literal["A", "B", "C", "D"]

    reply, _ = tiny_llm.json(messages, Pick, max_tokens=16)
    assert isinstance(reply.choice, str)


def test_the_answerer_chooses_by_scoring_and_shows_the_excerpts_behind_the_choice(slice_db, clock, tiny_llm):
    store = Store(slice_db)
    try:
        q = Query("Who was tightening screws?", clock.parse("DAY1 11:21:02"), ("Tasha", "Alice", "Shure", "Lucia"))
        for how in ("letter", "pmi"):
            settings = AnswerSettings(planner="rule", context_tokens=900, shared_top_n=0, choose=how, **MODEL_ALONE)
            a = Answerer(store, clock, settings, tiny_llm, budget=5, search=SearchSettings(dense=False)).answer(q)
            assert a.status == "ok" and a.choice in "ABCD" and a.answer.startswith(f"{a.choice}. ")
            assert a.usage.completion_tokens == 0 and a.scores["picks"][how] == a.choice
            assert len(a.scores["letter"]) == 4 and (how == "letter") == (a.scores["pmi"] == [])
            assert a.evidence and all(u in a.gathered.units for u in a.evidence)
        generating = Answerer(store, clock, AnswerSettings(planner="rule", context_tokens=900, shared_top_n=0,
                                                           choose="generate"),
                              tiny_llm, budget=5, search=SearchSettings(dense=False))
        voted = Answerer(store, clock, AnswerSettings(planner="rule", context_tokens=900, shared_top_n=0), tiny_llm,
                         budget=5, search=SearchSettings(dense=False)).answer(q)
        assert voted.choice == voted.scores["picks"]["voted"] and set(voted.scores["evidence"]) == {
            "mentions", "wearer", "lexical", "timing", "encounter"}
        generating.also_score = True  # the benchmark's comparison: both readings, then the generation
        a = generating.answer(q)
        assert a.status == "ok" and a.usage.completion_tokens > 0 and set(a.scores["picks"]) == {
            "letter", "cyclic", "likelihood", "pmi", "evidence", "voted"}
    finally:
        store.close()


def test_cyclic_scores_do_not_depend_on_the_order_the_options_are_given_in(slice_db, clock, tiny_llm):
    """`choose = "cyclic"`: each option read under every letter; the same options given in a
    rotated order get the same scores, so the pick cannot follow the first letter."""
    store = Store(slice_db)
    try:
        settings = AnswerSettings(planner="rule", context_tokens=600, shared_top_n=0, choose="cyclic", **MODEL_ALONE)
        answerer = Answerer(store, clock, settings, tiny_llm, budget=3, search=SearchSettings(dense=False))
        names = ("Tasha", "Alice", "Shure", "Lucia")
        by_order = []
        for shift in (0, 1):
            opts = names[shift:] + names[:shift]
            a = answerer.answer(Query("Who was tightening screws?", clock.parse("DAY1 11:21:02"), opts))
            assert a.status == "ok" and a.usage.completion_tokens == 0 and a.scores["picks"]["cyclic"] == a.choice
            assert len(a.scores["cyclic"]) == 4 and sum(math.exp(x) for x in a.scores["cyclic"]) <= 1.0 + 1e-6
            by_order.append((dict(zip(opts, a.scores["cyclic"], strict=True)), a.answer[3:]))
        (first, pick1), (second, pick2) = by_order
        assert pick1 == pick2  # the same person, whatever letter they were given
        for name in names:
            assert first[name] == pytest.approx(second[name], abs=0.05)
    finally:
        store.close()


def test_supporting_excerpts_share_the_options_words():
    units = [Unit(i, "A2_ALICE", 0, 30_000, text, ()) for i, text in
             enumerate(["I wash the cups", "Alice tightens the screws on the shelf", "screws in a box"], 1)]
    assert supporting(units, "Alice tightening screws shelf") == [2, 3, 1]  # 1: only Alice's own view
    assert supporting(units, "nothing in common") == []
    # the option's words first, the question's after; a wearer's own view says her name
    units.append(Unit(4, "A3_TASHA", 0, 30_000, "I put the box down", ()))
    assert supporting(units, "Tasha", "Who put the box of screws down?") == [4, 3, 2]
    assert supporting(units, "Lucia", "Who washed the cups?") == [1]


def test_an_open_answer_is_scored_by_the_option_nearest_to_it():
    from models.embed import Embedder

    embed = Embedder().embed
    letter, cos = nearest_option(embed, "Alice was tightening the screws of the shelf with a screwdriver.",
                                 ["a kettle on the stove", "assembling furniture with tools", "watching a movie",
                                  "buying groceries"])
    assert letter == "B" and len(cos) == 4 and max(cos) == cos[1] and all(-1 <= c <= 1 for c in cos)
    units = [Unit(1, "A2_ALICE", 0, 1, "我依旧在拧螺丝", ()), Unit(2, "A1_JAKE", 0, 1, "I pick it up\n我拿起来", ())]
    assert languages(units) == {"zh": 2, "en": 1}


def test_supporting_excerpts_bear_out_the_option_and_the_question_together():
    """"B. Alice" to "Who used the screwdriver first?": Alice's own caption with the screwdriver (in
    Chinese: 丝刀 counts as the question's word) before a line that names Alice about garlic."""
    units = [Unit(1, "A3_TASHA", 0, 30_000, "Alice: I can't stand it, I need to use the garlic now.", ()),
             Unit(2, "A2_ALICE", 0, 30_000, "遇上了不好开的我就用螺丝刀戳破了", ())]
    q = "Who used the screwdriver first?"
    assert supporting(units, "Alice", q, {"丝刀", "用"}) == [2, 1]
    assert supporting(units, "Alice", q) == [1, 2]  # without the translations her caption shares only her name
