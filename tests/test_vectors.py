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


def test_missing_model_file_is_a_clear_error(tmp_path):
    from models.embed import Embedder
    from models.errors import ModelError

    with pytest.raises(ModelError, match="not found"):
        Embedder(tmp_path / "none.onnx", tmp_path / "tokenizer.json")
