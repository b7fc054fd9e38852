import json

import pytest

from assistant.agentwise import MemorySearch
from assistant.answer import Answerer
from assistant.config import AnswerSettings
from assistant.planner import Request, plan, rule_plan
from assistant.query import Query
from daemon.cli import main
from memory.events import Event, EventStore
from memory.records import Observation
from models.errors import ModelTimeout
from tests.conftest import FakeLLM

AGENTS = ["A1_JAKE", "A2_ALICE", "A3_TASHA", "A4_LUCIA"]
T = 1_735_700_400_000


def test_rule_plan_takes_names_from_question_options_events_and_asker():
    q = Query("What did I give to Tasha?", T, ("a cup", "Lucia's phone"), asker="A1_JAKE")
    events = [Event(("Alice", "Tasha"), "cooking"), Event(("Alice",), "washing")]
    got = [r.agent for r in rule_plan(q, events, AGENTS, 6)]
    assert got[0] == "A3_TASHA" and set(got[1:3]) == {"A1_JAKE", "A4_LUCIA"} and got[3] == "A2_ALICE"
    assert set(got) == {"A1_JAKE", "A2_ALICE", "A3_TASHA", "A4_LUCIA"}
    assert all(r.query == q.question for r in rule_plan(q, events, AGENTS, 6))
    assert [r.agent for r in rule_plan(Query("what happened?", T), [], AGENTS, 2)] == AGENTS[:2]
    assert [r.agent for r in rule_plan(Query("Tasha?", T, agents=("A2_ALICE",)), [], AGENTS, 6)] == ["A2_ALICE"]


def test_llm_plan_maps_names_and_falls_back_to_rules_on_failure():
    q = Query("Who cut the mango?", T, asker="A1_JAKE")
    good = FakeLLM([{"requests": [{"person": "Alice", "query": "cut mango knife"},
                                  {"person": "Alice", "query": "cut mango knife"}]}])
    requests, kind, _ = plan("llm", good, q, [], "", AGENTS, 6)
    assert kind == "llm" and requests == [Request("A2_ALICE", "cut mango knife")]
    requests, kind, _ = plan("llm", FakeLLM([ModelTimeout("slow")]), q, [], "", AGENTS, 6)
    assert kind == "rule" and {r.agent for r in requests} == set(AGENTS)


@pytest.fixture
def crowd(store):
    """Alice mentions the drill once, in her own segment; everyone else talks drill all day."""
    obs = []
    for i in range(150):
        obs.append(Observation("A1_JAKE", "caption", T + i * 30_000, T + i * 30_000 + 1000,
                               f"drill drill drill noise {i}", lang="en"))
    obs.append(Observation("A2_ALICE", "caption", T + 7_000, T + 8_000, "I put the drill in the red box", lang="en"))
    obs.append(Observation("A3_TASHA", "caption", T + 9_000, T + 9_500, "the weather is nice", lang="en"))
    store.add(obs)
    return store


def test_per_agent_retrieval_widens_then_applies_threshold(crowd):
    s = AnswerSettings(retrieve_top_k=100, fallback_top_k=1000, agent_top_k=5, score_threshold=0.0)
    search = MemorySearch(crowd, s)
    search.refresh()
    q = Query("drill", T + 10_000_000)
    alice = search.for_agent(Request("A2_ALICE", "drill red box"), q)
    assert [u.agent for u in alice] == ["A2_ALICE"]  # found only in the 1000-candidate pass
    assert search.for_agent(Request("A3_TASHA", "drill"), q) == []
    strict = MemorySearch(crowd, AnswerSettings(score_threshold=1000.0, keep_best=False))
    assert strict.for_agent(Request("A2_ALICE", "drill red box"), q) == []
    lenient = MemorySearch(crowd, AnswerSettings(score_threshold=1000.0, keep_best=True))
    assert len(lenient.for_agent(Request("A2_ALICE", "drill red box"), q)) == 1
    narrow = MemorySearch(crowd, AnswerSettings(retrieve_top_k=100, fallback_top_k=100, score_threshold=0.0,
                                                keep_best=False))
    assert narrow.for_agent(Request("A2_ALICE", "drill"), q) == []  # Jake's 150 drills fill the top 100


def test_answer_cites_units_and_respects_switches(crowd, clock):
    EventStore(crowd).replace(T - T % 600_000, [Event(("Alice",), "Alice stored the drill", "garage")],
                              model="m", prompt_version="v", input_hash="h", rev=0)
    llm = FakeLLM([{"requests": [{"person": "Alice", "query": "drill red box"}]},
                   {"evidence": [1, 7, 1], "choice": "B"}])
    settings = AnswerSettings(score_threshold=0.0, merge_flat=False, planner="llm")  # EgoMAS: the model plans, its units alone
    a = Answerer(crowd, clock, settings, llm).answer(
        Query("Where is the drill?", T + 7_200_000, ("garden", "red box"), asker="A1_JAKE"))
    assert a.status == "ok" and a.choice == "B" and a.answer == "B. red box"
    assert a.cited and [u.agent for u in a.evidence] == ["A2_ALICE"]  # 7 is out of range, 1 once
    assert a.gathered.events[0].what == "Alice stored the drill"
    prompt = llm.calls[-1][0][1]["content"]
    assert "Alice stored the drill" in prompt and "[1] Alice" in prompt and "red box" in prompt
    flat = Answerer(crowd, clock, settings, FakeLLM([{"evidence": [], "choice": "A"}]), shared=False, dynamic=False)
    b = flat.answer(Query("Where is the drill?", T + 7_200_000, ("garden", "red box")))
    assert b.gathered.events == [] and b.gathered.planner == "none" and not b.cited and b.evidence


def test_shared_events_take_at_most_their_share_of_the_context(crowd, clock):
    """Twenty matching events would fill the context; the best of them fit `shared_share` and the
    excerpts keep the rest, and the answer reports the events it showed."""
    window = T - T % 600_000
    events = [Event(("Alice", "Jake"), f"Alice and Jake talked about the drill and the red box, part {i} of 20", "garage")
              for i in range(20)]
    EventStore(crowd).replace(window, events, model="m", prompt_version="v", input_hash="h", rev=0)
    crowd.add([Observation("A2_ALICE", "caption", T + 8_000 + i * 1000, T + 8_500 + i * 1000,
                           f"I look at the drill in the red box again, a long look number {i}", lang="en")
               for i in range(12)])
    q = Query("Where is the drill?", T + 7_200_000, ("garden", "red box"), asker="A1_JAKE")

    def ask(share):
        llm = FakeLLM([{"evidence": [1], "choice": "B"}])
        s = AnswerSettings(planner="rule", context_tokens=600, shared_share=share, choose="generate")
        a = Answerer(crowd, clock, s, llm).answer(q)
        prompt = llm.calls[-1][0][1]["content"]
        return a, prompt.split("Excerpts:")[0], prompt.split("Excerpts:")[1]

    capped, shared, excerpts = ask(0.25)
    whole, shared_all, excerpts_all = ask(1.0)
    assert 1 <= len(capped.gathered.events) < len(whole.gathered.events) == 20
    assert len(shared) // 4 <= 150 < len(shared_all) // 4  # FakeLLM counts 4 characters a token
    assert capped.gathered.events == whole.gathered.events[: len(capped.gathered.events)]  # the best first
    assert all(e.what in shared for e in capped.gathered.events)
    assert len(excerpts) > len(excerpts_all)  # what the events leave goes to the excerpts


def test_no_model_plans_requests_the_flat_search_leaves_no_room_for(crowd, clock):
    """With the flat search filling the budget (`flat_share` 1) the planned requests could not be
    shown: they are not searched, and the LLM planner is not asked (the rule planner's plan is
    reported); with room left (`flat_share` 0.5) the model plans and its requests are searched."""
    q = Query("Where is the drill?", T + 7_200_000, ("garden", "red box"), asker="A1_JAKE")
    plan = {"requests": [{"person": "Alice", "query": "drill red box"}]}
    full = FakeLLM([{"evidence": [1], "choice": "B"}])
    a = Answerer(crowd, clock, AnswerSettings(planner="llm", choose="generate"), full).answer(q)
    assert a.gathered.planner == "rule" and len(full.calls) == 1 and len(a.gathered.units) == 15
    room = FakeLLM([plan, {"evidence": [1], "choice": "B"}])
    b = Answerer(crowd, clock, AnswerSettings(planner="llm", choose="generate", flat_share=0.5), room).answer(q)
    assert b.gathered.planner == "llm" and len(room.calls) == 2
    assert "A2_ALICE" in {u.agent for u in b.gathered.units}


def test_answer_reports_a_model_failure(crowd, clock):
    a = Answerer(crowd, clock, AnswerSettings(planner="rule"), FakeLLM([ModelTimeout("too slow")])).answer(
        Query("Where is the drill?", T + 7_200_000))
    assert a.status == "error" and "too slow" in a.error and a.answer == ""


@pytest.mark.slow
def test_ask_end_to_end_through_tiny_model(slice_db, monkeypatch, capsys):
    monkeypatch.setenv("CHORUS__HOUSE__TIMEZONE", "Asia/Shanghai")
    monkeypatch.setenv("CHORUS__LLM__N_CTX", "4096")
    monkeypatch.setenv("CHORUS__LLM__MODEL", "tiny")
    monkeypatch.setenv("CHORUS__ANSWER__CHOOSE", "generate")  # the letter generated under its schema, with citations
    monkeypatch.setenv("CHORUS__ANSWER__CONTEXT_TOKENS", "1500")
    monkeypatch.setenv("CHORUS__LLM__TIME_LIMIT_S", "900")  # 2 cores shared with other work can be that slow
    args = ["ask", "Who used the screwdriver first?", "--option", "Tasha", "--option", "Alice", "--option", "Shure",
            "--option", "Lucia", "--as-of", "DAY1 11:21:02", "--planner", "rule", "--db", str(slice_db), "--json"]
    assert main(args) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["status"] == "ok" and got["choice"] in "ABCD" and got["answer"].startswith(got["choice"])
    assert got["mode"] == "model" and got["guard"] is None
    assert got["evidence"] and {"agent", "start", "end", "text", "kind"} <= set(got["evidence"][0])
    assert all(e["end"] <= "2025-01-01T11:21:02+08:00" for e in got["evidence"])
    assert set(got["timings_ms"]) == {"shared", "planning", "retrieval", "answering"}
    assert got["tokens"]["prompt"] > 100 and got["tokens"]["completion"] > 0


def test_empty_memory_still_answers(store, clock):
    llm = FakeLLM([{"evidence": [], "answer": "I have no memory of that yet."}])
    a = Answerer(store, clock, AnswerSettings(), llm).answer(Query("Where is the charger?", T))
    assert a.status == "ok" and a.gathered.requests == [] and a.gathered.units == []
    assert a.answer == "I don't find this in the memory." and a.choice is None and a.mode == "not_found"
    assert not llm.calls  # nothing to read: the model is not asked


def test_a_choice_with_nothing_behind_it_is_not_guessed(store, clock):
    """Multiple choice on an empty memory: no letter the model would only guess, the same
    "I don't find this" as an open question; with evidence, the model chooses."""
    llm = FakeLLM([{"evidence": [], "choice": "B"}])
    q = Query("Who used the screwdriver first?", T, options=("Tasha", "Alice", "Shure", "Lucia"))
    a = Answerer(store, clock, AnswerSettings(planner="rule", choose="generate"), llm).answer(q)
    assert (a.status, a.mode, a.guard, a.choice) == ("ok", "not_found", "no evidence", None) and not llm.calls
    assert a.answer == "I don't find this in the memory." and a.evidence == []
    store.add([Observation("A2_ALICE", "caption", T - 60_000, T - 59_000, "I keep tightening the screws with the "
                           "screwdriver", lang="en")])
    a = Answerer(store, clock, AnswerSettings(planner="rule", choose="generate"), llm).answer(q)
    assert (a.mode, a.choice) == ("model", "B") and llm.calls


def test_an_open_question_the_model_writes_gets_the_larger_context(slice_db, clock):
    """`open_context_tokens` for an open question whose answer the model writes; `context_tokens`
    for multiple choice and for an open "who" (whose answer is a scored name)."""
    from assistant.config import SearchSettings
    from memory.store import Store

    store = Store(slice_db)
    try:
        settings = AnswerSettings(planner="rule", shared_top_n=0, context_tokens=800, open_context_tokens=2400,
                                      talk_span=False)  # "at lunch" is a span now: its talk would be quoted
        t = clock.parse("DAY1 13:00:00")

        def size(question, options=(), reply=None):
            llm = FakeLLM([reply or {"evidence": [1], "answer": "Jake said they would order pizza around 12:10."}])
            a = Answerer(store, clock, settings, llm, budget=15, search=SearchSettings(dense=False)).answer(
                Query(question, t, options, asker="A1_JAKE"))
            return a.context_tokens

        written = size("What were we talking about at lunch?")
        choice = size("What were we talking about at lunch?", ("pizza", "cake", "games", "flowers"),
                      {"evidence": [1], "choice": "A"})
        who = size("Who talked about lunch?", reply={"evidence": [1], "answer": "Jake, around 12:10 on DAY1."})
        assert 1600 < written <= 2500 and choice <= 900 and who <= 900, (written, choice, who)  # headers on top
    finally:
        store.close()
