"""The default (hybrid) retriever on a real slice of EgoLife, with the real MiniLM model."""

import shutil

import pytest

from assistant.bench import hit
from assistant.config import SearchSettings
from assistant.query import Query
from assistant.retrievers import NAMES, Retrievers
from memory.store import Store
from models.errors import ModelError

SCREWDRIVER = ("Who used the screwdriver first?", ("Tasha", "Alice", "Shure", "Lucia"))


@pytest.fixture(scope="module")
def pool(slice_db, clock, tmp_path_factory):
    db = tmp_path_factory.mktemp("hybrid") / "slice.sqlite"
    shutil.copy(slice_db, db)
    r = Retrievers(Store(db), clock, SearchSettings())
    r.prepare()
    return r


def ask(pool, clock, name, question, options=(), at="DAY1 11:21:02", budget=15):
    q = Query(question, clock.parse(at), options, asker="A1_JAKE", budget=budget)
    return pool.make(name).retrieve(q)


def test_every_unit_has_a_vector_whatever_its_language_with_use(pool):
    seg, e = pool.vectors("use-multilingual")  # Chinese-only units too
    assert seg.table == "vec_segments_use" and e.dim == 512
    pool.prepare(encoders=("use-multilingual",))
    n_vec = pool.store.db.execute(f"SELECT COUNT(*) FROM {seg.table}").fetchone()[0]
    assert seg.pending() == 0 and n_vec == pool.store.counts()["segments"]
    got = ask(pool, pool.clock, "default@use-multilingual", *SCREWDRIVER)
    assert got.units and all(u.end_ms <= pool.clock.parse("DAY1 11:21:02") + 30_000 for u in got.units)


def test_minilm_is_the_default_with_its_own_table(pool):
    seg, e = pool.vectors()
    assert seg.table == "vec_segments" and e.dim == 384
    n_vec = pool.store.db.execute("SELECT COUNT(*) FROM vec_segments").fetchone()[0]
    n_seg = pool.store.counts()["segments"]
    assert seg.pending() == 0 and 0.5 * n_seg < n_vec < n_seg  # English lines only


def test_default_finds_the_moment_and_reads_the_intent(pool, clock):
    got = ask(pool, clock, "default", *SCREWDRIVER)
    assert hit(got.units, [clock.parse("DAY1 11:15:24")], 30_000)
    assert got.notes["intent"] == ["earliest"] and "screwdriv" in got.notes["entities"]
    assert all(u.end_ms <= clock.parse("DAY1 11:21:02") + 30_000 for u in got.units)
    assert len({u.start_ms for u in got.units}) == len(got.units) <= 15


def test_each_part_changes_the_ranking(pool, clock):
    """Every switch is live: turning a part off changes what some question gets."""
    questions = [SCREWDRIVER, ("Who wrote most of the words on the whiteboard?", ("Shure", "Me", "Lucia", "Katrina")),
                 ("What did we discuss this morning about the dessert?", ()),
                 ("Where was the small clapperboard on the table placed before?", ()),
                 ("When was the last time someone opened the box?", ())]  # `chain_seen`
    at = ["DAY1 11:21:02", "DAY1 13:02:32", "DAY1 12:50:00", "DAY1 11:35:19", "DAY1 12:30:00"]

    def ids(name):  # with the span: `no-widen` hands over the same units, 30 s long
        return [[(u.id, u.start_ms, u.end_ms) for u in ask(pool, clock, name, q, o, at=t).units]
                for (q, o), t in zip(questions, at, strict=True)]

    base = ids("default")
    for name in NAMES:
        # the slice has no events (tests/test_entities.py); the second encoder is off unless configured
        # (tests/test_multilingual.py)
        if name.startswith("no-") and name not in ("no-hierarchy", "no-second"):
            assert ids(name) != base, name


def test_a_unit_handed_over_is_joined_by_its_wearers_next_30_seconds(pool, clock):
    """`widen` 1 (the default): each unit spans 60 s, its own 30 s and then the same wearer's next 30 s,
    never past the question's time; not when that slot is a unit of its own already. Off (`no-widen`), 30 s."""
    at = clock.parse("DAY1 11:21:02")
    wide = ask(pool, clock, "default", *SCREWDRIVER).units
    narrow = ask(pool, clock, "no-widen", *SCREWDRIVER).units
    assert [u.id for u in wide] == [u.id for u in narrow] and all(u.end_ms - u.start_ms == 30_000 for u in narrow)
    after = pool.store.beside(narrow, 1, at)
    taken = {u.start_ms for u in narrow}  # one unit a slot, whoever wears it
    n_joined = 0
    for w, n in zip(wide, narrow, strict=True):
        nxt = after.get(n.id)
        if nxt is None or nxt.start_ms in taken:
            assert (w.end_ms, w.text, w.obs_ids) == (n.end_ms, n.text, n.obs_ids)
            continue
        n_joined += 1
        assert (w.start_ms, w.end_ms) == (n.start_ms, n.end_ms + 30_000) and w.text.startswith(n.text)
        assert w.obs_ids == n.obs_ids + nxt.obs_ids
        assert max(e for _, e, _ in pool.store.line_times(w.obs_ids)) <= at  # nothing said after the question
        assert w.extra["core"] == n.text  # what the search chose, for the evidence's vote
    assert n_joined >= 3, n_joined
    back = pool.make("default", {"widen": -1}).retrieve(Query(SCREWDRIVER[0], at, SCREWDRIVER[1], asker="A1_JAKE"))
    before = pool.store.beside(narrow, -1, at)
    backwards = [(u, n) for u, n in zip(back.units, narrow, strict=True) if u.start_ms < n.start_ms]
    assert backwards and all(u.id == n.id and u.start_ms == n.start_ms - 30_000 and u.end_ms == n.end_ms
                             and u.text.startswith(before[n.id].text) and u.extra["core"] == n.text
                             for u, n in backwards)


def test_earliest_intent_reaches_back_in_time(pool, clock):
    q = ("When did we first talk about the puzzle?", ())
    with_time = ask(pool, clock, "default", *q, at="DAY1 12:59:00")
    without = ask(pool, clock, "no-temporal", *q, at="DAY1 12:59:00")
    assert min(u.start_ms for u in with_time.units) < min(u.start_ms for u in without.units)


def test_an_unloadable_embedding_model_leaves_lexical_search(house, clock):
    def broken():
        raise ModelError("no such model")

    r = Retrievers(house, clock, SearchSettings(), embedder_factory=broken)
    got = ask(r, clock, "default", *SCREWDRIVER)
    assert got.units and not r.dense_ok()


def test_planned_requests_search_one_agent_each(house, clock):
    from assistant.agentwise import MemorySearch
    from assistant.config import AnswerSettings
    from assistant.planner import Request

    pool = Retrievers(house, clock, SearchSettings(dense=False))
    pool.prepare()
    q = Query("Who used the screwdriver first?", clock.parse("DAY1 11:21:02"), asker="A1_JAKE")
    hybrid = MemorySearch(pool.store, AnswerSettings(agent_top_k=4), pool.make("default"))
    hybrid.refresh()
    got = hybrid.for_agent(Request("A2_ALICE", "screwdriver"), q)
    assert len(got) == 4 and {u.agent for u in got} == {"A2_ALICE"} and got[0].extra["query"] == "screwdriver"
    egomas = MemorySearch(pool.store, AnswerSettings(agent_search="egomas", score_threshold=1e6, keep_best=False),
                          pool.make("default"))
    assert egomas.for_agent(Request("A2_ALICE", "screwdriver"), q) == []  # EgoMAS's threshold applies


def test_spread_reaches_more_moments_without_losing_the_best(pool, clock):
    """With `spread_minutes`, the last `spread_share` of the budget goes to units at least that many
    minutes from every unit chosen before: the 15 units cover more distinct moments, the best
    unit stays first."""
    q = ("What did we discuss this morning about the dessert?", ())

    def moments(units, within=120_000):
        starts, n = sorted(u.start_ms for u in units), 0
        for i, t in enumerate(starts):
            n += all(t - s > within for s in starts[:i])
        return n

    plain = ask(pool, clock, "default", *q, at="DAY1 12:50:00").units
    pool_spread = pool.make("default", {"spread_minutes": 2.0, "spread_share": 0.5})
    spread = pool_spread.retrieve(Query(q[0], clock.parse("DAY1 12:50:00"), (), asker="A1_JAKE", budget=15)).units
    assert len(spread) == len(plain) == 15
    assert spread[0].id == plain[0].id
    assert moments(spread) > moments(plain), (moments(spread), moments(plain))
    assert {u.id for u in plain[:7]} <= {u.id for u in spread}  # the best half is kept as it was
