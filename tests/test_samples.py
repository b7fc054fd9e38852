"""Several open replies drawn, the one nearest the evidence (or the others) shown (`assistant.samples`)."""

import pytest

from assistant.answer import Answerer
from assistant.config import AnswerSettings
from assistant.query import Query
from assistant.vote import DenseReader
from memory.records import Observation
from tests.conftest import FakeLLM

T = 1_735_700_400_000  # DAY1 11:00:00 in Asia/Shanghai


@pytest.fixture(scope="module")
def reader():
    from models.multilingual import MultilingualEncoder

    return DenseReader(MultilingualEncoder())


@pytest.fixture
def memory(store):
    store.add([Observation("A1_JAKE", "transcript", T + 600_000, T + 602_000, "Let's order pizza for dinner",
                           speaker="Katrina", lang="en"),
               Observation("A6_SHURE", "transcript", T + 960_000, T + 962_000, "I could cook noodles for dinner",
                           speaker="Shure", lang="en")])
    return store


def ask(memory, clock, reader, replies, **settings):
    llm = FakeLLM([{"evidence": [1], "answer": r} for r in replies])
    answerer = Answerer(memory, clock, AnswerSettings(planner="rule", **settings), llm)
    answerer.dense = reader  # the first encoder of the daemon's hybrid search
    return answerer.answer(Query("What is for dinner?", T + 3_600_000)), llm


def test_the_reply_the_draws_agree_on_is_shown(memory, clock, reader):
    a, llm = ask(memory, clock, reader, ["Shure said he could cook noodles for dinner.",
                                         "Katrina said they would order pizza for dinner.",
                                         "Katrina wants to order a pizza for dinner.",
                                         "Katrina suggested ordering pizza for dinner."], open_samples=4,
                          open_choose="agree")
    answers = [c for c in llm.calls if c[1].__name__ == "OpenAnswer"]
    assert len(answers) == 4
    assert "temperature" not in answers[0][2] and [c[2]["seed"] for c in answers[1:]] == [1, 2, 3]
    assert all(c[2]["temperature"] == 0.8 for c in answers[1:])
    s = a.scores["samples"]
    assert len(s["texts"]) == 4 and a.mode == "model"
    assert "pizza" in a.answer and s["pick"] in (1, 2, 3), s  # three of the four speak of pizza


def test_the_reply_nearest_the_evidence_is_shown_by_default(memory, clock, reader):
    """`support`, the default way: two replies that agree with each other about what no excerpt
    says lose to the one the excerpts bear out; `agree` shows one of the two."""
    replies = ["Katrina said they would have dinner by the lake.", "Katrina wants to have dinner at the lake.",
               "Katrina said they would order pizza for dinner."]
    a, llm = ask(memory, clock, reader, replies, open_samples=3)
    assert sum(c[1].__name__ == "OpenAnswer" for c in llm.calls) == 3
    assert a.scores["samples"]["pick"] == 2 and "pizza" in a.answer, a.scores["samples"]
    agreed, _ = ask(memory, clock, reader, replies, open_samples=3, open_choose="agree")
    assert agreed.scores["samples"]["pick"] in (0, 1) and "lake" in agreed.answer


def test_one_reply_by_default_and_the_greedy_one_wins_a_tie(memory, clock, reader):
    a, llm = ask(memory, clock, reader, ["Katrina said they would order pizza for dinner."])
    assert sum(c[1].__name__ == "OpenAnswer" for c in llm.calls) == 1 and not (a.scores or {}).get("samples")
    two, _ = ask(memory, clock, reader, ["Katrina said they would order pizza for dinner.",
                                        "Shure said he could cook noodles for dinner."], open_samples=2,
                 open_choose="agree")
    assert two.scores["samples"]["pick"] == 0 and "pizza" in two.answer  # two replies agree equally: the greedy


def test_an_unusable_draw_is_left_out(memory, clock, reader):
    a, _ = ask(memory, clock, reader, ["Katrina said they would order pizza for dinner.",
                                       "The answer is: The answer is: The answer is: The answer is:",
                                       "Katrina wants to order a pizza for dinner."], open_samples=3)
    assert len(a.scores["samples"]["texts"]) == 2 and "pizza" in a.answer


def test_the_reply_the_evidence_makes_likeliest_is_shown_by_pmi(memory, clock, reader, monkeypatch):
    from assistant import samples

    read_texts = []

    def read(texts):  # the model's readings as `samples.reads` gives them: (mean, pmi)
        read_texts.append(texts)
        return [-1.0 for _ in texts], [9.0 if "noodles" in t else 1.0 for t in texts]

    monkeypatch.setattr(samples, "reads", lambda llm, messages, usage: read)
    replies = ["Katrina said they would order pizza for dinner.", "Katrina wants to order a pizza for dinner.",
               "Shure said he could cook noodles for dinner."]
    a, _ = ask(memory, clock, reader, replies, open_samples=3, open_choose="pmi")
    s = a.scores["samples"]
    assert read_texts == [s["texts"]] and s["pmi"] == [1.0, 1.0, 9.0] and s["pick"] == 2 and "noodles" in a.answer
    supported, _ = ask(memory, clock, reader, replies, open_samples=3)  # support: the readings kept, not used
    assert "pizza" in supported.answer and supported.scores["samples"]["pmi"] == [1.0, 1.0, 9.0]


def test_replies_the_model_cannot_read_leave_the_greedy_one(memory, clock, reader, monkeypatch):
    from assistant import samples
    from models.errors import ModelError

    def read(texts):
        raise ModelError("the process is stopping")

    monkeypatch.setattr(samples, "reads", lambda llm, messages, usage: read)
    a, _ = ask(memory, clock, reader, ["Shure said he could cook noodles for dinner.",
                                       "Katrina said they would order pizza for dinner."], open_samples=2,
               open_choose="pmi")
    assert "noodles" in a.answer and a.guard == "not chosen: the process is stopping", (a.answer, a.guard)
