import numpy as np
import pytest

from memory.records import Observation
from memory.tokenize import english_view
from memory.vectors import VectorIndex


def test_english_view_keeps_latin_lines():
    text = "Jake: 好然后一个秒表\nJake: Okay, then we need a stopwatch.\nTasha正在吃煎饼\nI pick up the phone."
    assert english_view(text) == "Jake: Okay, then we need a stopwatch.\nI pick up the phone."
    assert english_view("我拿着糖一边走") == ""


class CountingEmbed:
    """A deterministic stand-in (bag of letters) that counts what it is asked to embed."""

    def __init__(self):
        self.seen = []

    def __call__(self, texts):
        self.seen.extend(texts)
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for r, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[r, ord(ch) - 97] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def obs(agent, t_s, text):
    return Observation(agent, "caption", t_s * 1000, t_s * 1000 + 1000, text)


def test_refresh_embeds_only_what_changed_and_filters_by_time(store):
    store.add([obs("A", 0, "zzz zzz buzz"), obs("A", 60, "apple banana"), obs("B", 120, "只有中文")])
    embed = CountingEmbed()
    vi = VectorIndex(store, embed, model="letters", dim=26)
    assert vi.refresh() == 3 and len(embed.seen) == 2  # the Chinese-only unit gets no vector
    assert vi.refresh() == 0 and len(embed.seen) == 2
    store.add([obs("B", 180, "zebra pizza")])
    assert vi.refresh() == 1 and embed.seen[-1] == "zebra pizza"
    q = embed(["zzz"])[0]
    hits = vi.search(q, k=5)
    assert [store.units([i])[i].start_ms for i, _ in hits][:2] == [0, 180_000]
    assert all(-1e-6 <= s <= 1 + 1e-6 for _, s in hits)
    before = vi.search(q, k=5, as_of=100_000)
    assert {store.units([i])[i].start_ms for i, _ in before} == {0, 60_000}
    b = {v: k for k, v in store.agents().items()}["B"]
    assert {store.units([i])[i].agent for i, _ in vi.search(q, k=5, agents=[b])} == {"B"}


def test_a_new_model_rebuilds(store):
    store.add([obs("A", 0, "one line"), obs("A", 60, "another line")])
    VectorIndex(store, CountingEmbed(), model="letters", dim=26).refresh()
    again = CountingEmbed()
    vi = VectorIndex(store, again, model="letters-v2", dim=26)
    assert vi.pending() == 2 and vi.refresh() == 2 and len(again.seen) == 2


def test_real_minilm_ranks_a_paraphrase_first():
    from models.embed import Embedder

    e = Embedder()
    q, *docs = e.embed(["Who fixed the shelf?", "Jake is tightening screws on the rack with a screwdriver.",
                        "Lucia eats watermelon in the kitchen.", "Alice waters the flowers."])
    sims = [float(q @ d) for d in docs]
    assert sims[0] == max(sims)
    assert np.allclose(np.linalg.norm([q, *docs], axis=1), 1.0, atol=1e-4)


def test_units_and_questions_share_an_int8_graph_made_once(tmp_path, monkeypatch):
    """The int8 graph (int8 MatMul weights, NaN guards dropped, GELUs fused) is made once into the
    model cache; units and questions both run through it, to within a few hundredths of the float
    graph, and the stored vectors' model name says which graph made them (a change re-embeds)."""
    import onnx

    from models.embed import Embedder, bundled_paths

    monkeypatch.setenv("CHORUS_MODEL_CACHE", str(tmp_path))
    texts = ["Who used the screwdriver first?\nTasha / Alice / Shure / Lucia",
             "What were we talking about at lunch?", "Jake is tightening screws on the rack with a screwdriver.",
             "Lucia eats watermelon in the kitchen."]
    fast, slow = Embedder(threads=2), Embedder(query_int8=False, units_int8=False)
    assert fast.query_model.parent == tmp_path and fast.query_model.name.endswith(".query-int8.onnx")
    assert fast.units_model == fast.query_model and slow.query_model == slow.units_model == bundled_paths()[0]
    assert fast.name != slow.name and slow.name.endswith("model.onnx")
    ops = [n.op_type for n in onnx.load(str(fast.query_model)).graph.node]
    assert "IsNaN" not in ops and "Erf" not in ops and ops.count("Gelu") == 6 and "MatMulInteger" in ops
    made = fast.query_model.stat().st_mtime_ns
    assert Embedder().query_model.stat().st_mtime_ns == made  # kept, not made again
    q, f = fast.embed_query(texts), slow.embed_query(texts)
    assert np.allclose(f, slow.embed(texts), atol=1e-5)  # the float graph, one text or a batch
    assert not np.array_equal(q, f)  # another graph did run
    assert ((q * f).sum(1) > 0.97).all()
    u = fast.embed(texts * 10)  # 40 texts: batches on both sessions side by side
    assert u.shape == (40, 384) and np.allclose(np.linalg.norm(u, axis=1), 1, atol=1e-4)
    assert ((u[:4] * f).sum(1) > 0.97).all() and ((u[:4] * q).sum(1) > 0.97).all()
    assert np.allclose(u[:4], u[4:8], atol=0.03)  # the same text in other batches
    docs = u[2:4]
    assert int(np.argmax(docs @ q[0])) == int(np.argmax(docs @ f[0])) == 0


def test_the_int8_graph_s_rewrites_keep_its_numbers(tmp_path, monkeypatch):
    """Dropping the softmax NaN guards and fusing the GELUs changes no output beyond float noise."""
    import onnxruntime as ort

    from models.embed import bundled_paths
    from models.query_graph import _make, simplify

    monkeypatch.setattr("models.query_graph.simplify", lambda path: (0, 0))  # the quantized graph as it was
    plain = tmp_path / "plain.onnx"
    _make(bundled_paths()[0], plain)
    rewritten = tmp_path / "rewritten.onnx"
    rewritten.write_bytes(plain.read_bytes())
    assert simplify(rewritten) == (6, 6)
    ids = np.array([[101, 2040, 2109, 1996, 11213, 2034, 102, 0, 0], [101, 7570, 2003, 2437, 1037, 3419, 102, 0, 0]])
    mask = (ids > 0).astype(np.int64)
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    a, b = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, feed)[0]
            for p in (plain, rewritten))
    assert np.abs(a - b).max() < 1e-3 and not np.isnan(b).any()


def test_a_graph_the_quantizer_cannot_read_leaves_questions_float(tmp_path, monkeypatch, caplog):
    from models.query_graph import query_graph

    monkeypatch.setenv("CHORUS_MODEL_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not an onnx graph")
    assert query_graph(bad) is None
    assert "encoder stays float32" in caplog.text
    assert not list((tmp_path / "cache").glob("*.onnx"))


def test_a_rewrite_that_spoils_the_graph_is_not_used(tmp_path, monkeypatch, caplog):
    """The made graph is checked against the float one before it is kept: a rewrite that changes
    its numbers leaves the encoder on the float graph, with a warning, and nothing in the cache."""
    import onnx

    from models.embed import bundled_paths
    from models.query_graph import query_graph

    def spoil(path):  # every GELU dropped: the graph still loads, its numbers are wrong
        m = onnx.load(str(path))
        for n in m.graph.node:
            if n.op_type == "Erf":
                n.op_type = "Neg"
        onnx.save(m, str(path))
        return 0, 0

    monkeypatch.setenv("CHORUS_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("models.query_graph.simplify", spoil)
    assert query_graph(bundled_paths()[0]) is None
    assert "encoder stays float32" in caplog.text and "strays" in caplog.text
    assert not list((tmp_path / "cache").glob("*.onnx"))


def test_missing_model_file_is_a_clear_error(tmp_path):
    from models.embed import Embedder
    from models.errors import ModelError

    with pytest.raises(ModelError, match="not found"):
        Embedder(tmp_path / "none.onnx", tmp_path / "tokenizer.json")


def test_the_memory_mirror_finds_what_sqlite_vec_finds(store):
    """The in-memory matrices (one per day) against sqlite-vec's own k-nearest query, also after
    units change day, lose their text, or are written by another VectorIndex (another process)."""
    day = 86_400
    store.add([obs("AB"[i % 2], i * 97 % (3 * day), f"line {i} " + "abcdefghij"[i % 10] * (i % 7 + 1))
               for i in range(400)])
    embed = CountingEmbed()
    vi = VectorIndex(store, embed, model="letters", dim=26)
    vi.refresh()
    b = {v: k for k, v in store.agents().items()}["B"]

    def same():
        for text in ("aaa line", "jjj", "line bbb"):
            q = embed([text])[0]
            for as_of, agents in ((None, None), (day * 1000, None), (int(1.5 * day * 1000), [b]), (0, None)):
                got = vi.search(q, k=20, as_of=as_of, agents=agents)
                want = vi.search_sql(q, k=20, as_of=as_of, agents=agents)
                assert [i for i, _ in got] == [i for i, _ in want] or np.allclose(
                    sorted(s for _, s in got), sorted(s for _, s in want), atol=1e-5)
                assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-5)

    same()
    other = VectorIndex(store, embed, model="letters", dim=26)  # a second writer, as another process
    store.add([obs("A", 3 * day + 5, "zebra pizza"), obs("B", 10, "only 中文 now jjj"),
               obs("A", 2 * day + 20, "只有中文")])
    other.refresh()
    same()
    assert len(vi.matrix) == vi.store.db.execute("SELECT COUNT(*) FROM vec_segments").fetchone()[0]
    vi.reset()
    vi.refresh()
    same()


def test_the_sign_bit_shortlist_keeps_the_nearest_and_the_filters():
    """Beyond EXACT x RERANK x k rows the mirror re-ranks a Hamming shortlist: on clustered vectors
    it still finds nearly all of the exact top k, and never a row the filters exclude."""
    from memory.vecmatrix import EXACT, RERANK, VectorMatrix

    rng = np.random.default_rng(7)
    centres = rng.normal(size=(20, 384))
    vecs = (centres[rng.integers(0, 20, 6000)] + rng.normal(scale=0.5, size=(6000, 384))).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    day = 86_400_000
    m = VectorMatrix(384)
    m.upsert((i, vecs[i], (i % 3) * day + i, i % 4) for i in range(6000))
    k = 10
    assert 6000 > EXACT * RERANK * k
    recalls = []
    for qi in range(20):
        q = vecs[qi] + rng.normal(scale=0.02, size=384).astype(np.float32)
        as_of = 2 * day
        ok = np.array([(i % 3) * day + i <= as_of and i % 4 in (1, 2) for i in range(6000)])
        sims = vecs @ (q / np.linalg.norm(q))
        exact = set(np.flatnonzero(ok)[np.argsort(-sims[ok])[:k]].tolist())
        got = m.search(q, k=k, as_of=as_of, agents=[1, 2])
        assert len(got) == k and all(ok[i] for i, _ in got)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        recalls.append(len(exact & {i for i, _ in got}) / k)
    assert np.mean(recalls) >= 0.9, recalls


def test_a_refresh_of_at_most_n_rows_takes_whole_revisions_oldest_first(store):
    """`most` bounds a turn of the daemon's catch-up; a revision is never split, so a revision larger
    than `most` is done whole rather than redone forever."""
    store.add([obs("A", 0, "first hour one"), obs("A", 10, "first hour two"), obs("B", 0, "first hour three")])
    store.add([obs("A", 3600, "second hour")])
    store.add([obs("A", 7200, "third hour")])
    embed = CountingEmbed()
    vi = VectorIndex(store, embed, model="letters", dim=26)
    assert vi.refresh(most=1) == 2  # the first revision holds 2 units (A and B): both, nothing of the next
    assert sorted(embed.seen) == ["first hour one\nfirst hour two", "first hour three"]
    assert vi.pending() == 2
    assert vi.refresh(most=1) == 1 and embed.seen[-1] == "second hour"
    assert vi.refresh(most=5) == 1 and embed.seen[-1] == "third hour"
    assert vi.refresh(most=5) == 0 and vi.pending() == 0 and len(embed.seen) == 4
