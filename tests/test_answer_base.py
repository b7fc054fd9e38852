"""The default answering model (`base`, Qwen2.5-Coder-0.5B) reads the memory's own language: an
English question is answered from Chinese first-person lines, each read as its wearer's."""

import pytest

from assistant.answer import Answerer
from assistant.config import AnswerSettings, SearchSettings
from assistant.query import Query
from daemon.settings import Settings
from memory.records import Observation
from memory.store import Store

pytestmark = pytest.mark.slow
# four wearers at the same moment, each busy with screws; only Alice tightens them
LINES = {"A3_TASHA": "我把一袋螺丝递给别人", "A2_ALICE": "我依旧在拧螺丝", "A6_SHURE": "我看着桌上的螺丝盒",
         "A4_LUCIA": "我在找螺丝刀"}


@pytest.fixture(scope="module")
def base_llm():
    from models.bundled import resolve
    from models.llm import LocalLLM

    assert Settings().llm.model == "base"  # what a fresh install answers with
    llm = LocalLLM(resolve("base"), n_ctx=4096, n_threads=2, time_limit_s=900)
    yield llm
    llm.close()


def test_chinese_first_person_lines_answer_an_english_question(tmp_path, clock, base_llm):
    store = Store(tmp_path / "screws.sqlite")
    try:
        t = clock.parse("DAY1 11:16:00")
        store.add([Observation(agent, "caption", t, t + 4000, text, lang="zh") for agent, text in LINES.items()])
        # the default reading (`choose = "cyclic"`, the letters scored in every cyclic order of the
        # options); generated under the schema, base takes the first option here (Tasha)
        assert AnswerSettings().choose == "cyclic"
        answerer = Answerer(store, clock, AnswerSettings(shared_top_n=0), base_llm, budget=4,
                            search=SearchSettings(dense=False))
        q = Query("谁在拧螺丝？Who was tightening the screws?", t + 60_000, ("Tasha", "Alice", "Shure", "Lucia"),
                  asker="A1_JAKE")
        a = answerer.answer(q)
        assert len(a.gathered.units) == 4
        assert a.status == "ok" and a.choice == "B", (a.answer, a.scores)
        assert any(u.agent == "A2_ALICE" for u in a.evidence) and a.usage.completion_tokens == 0
        assert a.scores["picks"]["cyclic"] == "B" and len(a.scores["cyclic"]) == 4
        plain = Answerer(store, clock, AnswerSettings(shared_top_n=0, choose="letter", name_wearer=False), base_llm,
                         budget=4, search=SearchSettings(dense=False)).answer(q)
        assert plain.status == "ok" and plain.choice in "ABCD"
    finally:
        store.close()
