import bm25s
import numpy as np
import pytest

from memory.clock import DAY_MS
from memory.lexical import LexicalIndex
from memory.records import Observation
from memory.tokenize import tokenize

D1 = 1_735_689_600_000  # 2025-01-01T00:00Z, a day boundary


def obs(agent, day, sec, text):
    t = D1 + (day - 1) * DAY_MS + sec * 1000
    return Observation(agent, "caption", t, t + 2000, text)


@pytest.fixture
def filled(store):
    store.add([
        obs("jake", 1, 36_000, "red charger"), obs("jake", 1, 36_060, "blue cup"),
        obs("alice", 2, 40_000, "red charger"),
        *[obs("alice", 2, 40_100 + 60 * i, f"green thing{i}") for i in range(8)],
        obs("jake", 3, 50_000, "charger cable"),
    ])
    return store


def texts(store, hits):
    units = store.units([i for i, _ in hits])
    return [(units[i].agent, units[i].text) for i, _ in hits]


def test_as_of_cut_off_is_strict(filled):
    ix = LexicalIndex(filled)
    ix.refresh()
    day2_end = D1 + DAY_MS + 40_000_000 + 2000  # the alice charger ends exactly here
    got = texts(filled, ix.search(tokenize("charger"), k=10, as_of=day2_end))
    assert sorted(got) == [("alice", "red charger"), ("jake", "red charger")]
    assert ("alice", "red charger") not in texts(filled, ix.search(tokenize("charger"), k=10, as_of=day2_end - 1))
    assert len(ix.search(tokenize("charger"), k=10)) == 3


def test_agent_and_time_filters(filled):
    ix = LexicalIndex(filled)
    ix.refresh()
    jake = {v: k for k, v in filled.agents().items()}["jake"]
    assert {a for a, _ in texts(filled, ix.search(tokenize("charger"), k=10, agents=[jake]))} == {"jake"}
    day3 = texts(filled, ix.search(tokenize("charger"), k=10, start_ms=D1 + 2 * DAY_MS))
    assert day3 == [("jake", "charger cable")]


def test_scores_compare_across_day_shards_as_one_index(filled):
    """Same text on two days scores the same: the shards use the global IDF."""
    ix = LexicalIndex(filled)
    ix.refresh()
    assert len(ix.shards) == 3
    hits = ix.search(tokenize("red charger"), k=10)
    by_text = {}
    for i, s in hits:
        by_text.setdefault(filled.units([i])[i].text, []).append(s)
    assert by_text["red charger"][0] == pytest.approx(by_text["red charger"][1], rel=1e-5)
    rows = filled.db.execute("SELECT id, text FROM segments ORDER BY id").fetchall()
    one = bm25s.BM25()
    one.index([tokenize(r[1]) for r in rows], show_progress=False)
    ref = one.get_scores(tokenize("red"))
    red = [i for i, _ in ix.search(tokenize("red"), k=10)]
    mine = dict(ix.search(tokenize("red"), k=10))
    for pos, r in enumerate(rows):
        if r[0] in red:
            assert mine[r[0]] == pytest.approx(float(ref[pos]), rel=0.25)  # same IDF, per-shard length norm


def test_refresh_rebuilds_only_the_changed_day(filled):
    ix = LexicalIndex(filled)
    assert sorted(ix.refresh()) == [D1 // DAY_MS, D1 // DAY_MS + 1, D1 // DAY_MS + 2]
    assert ix.refresh() == []
    filled.add([obs("alice", 3, 60_000, "charger in the drawer")])
    assert ix.refresh() == [D1 // DAY_MS + 2]
    assert ("alice", "charger in the drawer") in texts(filled, ix.search(tokenize("drawer"), k=3))


def test_index_persists_and_reloads_without_rebuilding(filled):
    first = LexicalIndex(filled)
    first.refresh()
    want = first.search(tokenize("charger"), k=10)
    again = LexicalIndex(filled)
    assert again.refresh() == []
    assert again.search(tokenize("charger"), k=10) == want


def test_corrupt_index_folder_is_rebuilt(filled):
    ix = LexicalIndex(filled)
    ix.refresh()
    (ix.folder / "manifest.json").write_text("{not json")
    again = LexicalIndex(filled)
    assert len(again.refresh()) == 3
    assert len(again.search(tokenize("charger"), k=10)) == 3


@pytest.mark.parametrize("victim", ["meta.npz", "info.json", "bm25/params.index.json", "bm25/data.csc.index.npy"])
def test_a_truncated_shard_is_rebuilt_at_start_up_not_a_crash(filled, victim):
    ix = LexicalIndex(filled)
    ix.refresh()
    want = ix.search(tokenize("charger"), k=10)
    shard = sorted(p for p in ix.folder.iterdir() if p.is_dir())[0]
    path = shard / victim
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 3)])  # a crash mid-write
    again = LexicalIndex(filled)
    assert again.search(tokenize("charger"), k=10) == want
    assert LexicalIndex(filled).search(tokenize("charger"), k=10) == want  # and saved again, whole
    assert not [p for p in ix.folder.iterdir() if p.name.startswith(".")]  # no temporary folders left


def test_chinese_query_finds_chinese_caption(store):
    store.add([obs("lucia", 1, 1000, "这个螺丝刀它没有磁吸"), obs("lucia", 1, 2000, "我们去厨房做饭")])
    ix = LexicalIndex(store)
    ix.refresh()
    assert texts(store, ix.search(tokenize("螺丝刀"), k=1)) == [("lucia", "这个螺丝刀它没有磁吸")]


def test_search_many_is_search_of_each_query(store):
    """The options of a question searched at once score as each searched alone."""
    words = ["apple", "pear", "knife", "table", "screwdriver", "shelf", "melon", "cake"]
    store.add([Observation("AB"[i % 2], "caption", i * 40_000 + (i % 3) * 86_400_000,
                           i * 40_000 + (i % 3) * 86_400_000 + 1000, " ".join(words[(i * j) % 8] for j in range(1, 5)))
               for i in range(300)])
    ix = LexicalIndex(store)
    ix.refresh()
    queries = [{"apple": 1.0, "knife": 1.0, "cake": 0.5}, {"apple": 1.0, "knife": 1.0, "shelf": 0.5},
               {"apple": 1.0, "knife": 1.0, "pear": 0.5, "melon": 0.5}]
    for as_of, agents in ((None, None), (86_400_000 + 2_000_000, None), (None, [1])):
        many = ix.search_many(queries, k=25, as_of=as_of, agents=agents)
        for q, got in zip(queries, many, strict=True):
            want = ix.search(q, k=25, as_of=as_of, agents=agents)
            assert np.allclose([s for _, s in got], [s for _, s in want], rtol=1e-5)
            cut = want[-1][1] + 1e-5  # rows tied at the k-th score may be either (the texts repeat)
            assert {i for i, s in got if s > cut} == {i for i, s in want if s > cut}


def test_the_kept_document_frequencies_follow_new_rows(filled):
    """A token's document frequency over every shard is kept between searches and made again when
    a refresh changes a shard: a word that becomes common weighs less, as a new index would say."""
    ix = LexicalIndex(filled)
    ix.refresh()
    (cable,) = tokenize("cable")
    rare = ix.idf(cable)
    assert rare > 0
    first = ix.search(tokenize("cable"), k=3)
    filled.add([obs("alice", 4, 1000 + 60 * i, f"cable number{i}") for i in range(6)])
    ix.refresh()
    fresh = LexicalIndex(filled, folder=filled.path + ".other")
    fresh.refresh()
    assert ix.idf(cable) < rare and ix.idf(cable) == pytest.approx(fresh.idf(cable))
    assert ix.search(tokenize("cable"), k=10) == fresh.search(tokenize("cable"), k=10)
    assert first[0][1] > ix.search(tokenize("cable"), k=1)[0][1]
