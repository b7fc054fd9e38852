"""Questions first: background work (the embedding backlog, consolidation) holds off while a
question is in flight, and resumes after it. No timing is asserted: the background jobs below
would do many slices during the question if they did not yield."""

import threading
import time

import numpy as np

from assistant.answer import Answerer
from assistant.config import AnswerSettings, ConsolidationSettings
from assistant.consolidate import Consolidator
from assistant.query import Query
from daemon.asking import Asking
from memory.events import EventStore
from memory.records import Observation
from memory.store import Store
from memory.vectors import VectorIndex
from models.llm import LOW, ModelPreempted, Usage
from models.yielding import Foreground
from tests.conftest import FakeLLM

W = 1_735_700_400_000


def test_a_paused_worker_waits_for_every_question_and_a_closed_signal_frees_it():
    fg = Foreground()
    assert not fg.busy() and fg.pause(timeout=0)
    with fg.question(), fg.question():
        assert fg.busy() and fg.pause(timeout=0.01) is False
    assert fg.pause(timeout=0) and fg.counts == {"questions": 2, "pauses": 1}
    with fg.question():
        fg.close()  # the process stops: nothing waits any more
        assert fg.pause() and not fg.busy()


class SlowLLM(FakeLLM):
    """Answers after a while, noting whether the question was in flight while it read."""

    def __init__(self, replies, fg: Foreground):
        super().__init__(replies)
        self.fg, self.busy_seen = fg, []

    def json(self, messages, schema, **kw):
        self.busy_seen.append(self.fg.busy())
        time.sleep(0.4)
        return super().json(messages, schema, **kw)


def test_the_embedder_pauses_between_batches_while_a_question_is_answered(store, clock):
    store.add([Observation(f"A{i % 4 + 1}_X", "caption", W + i * 60_000, W + i * 60_000 + 1000,
                           f"I hold the drill number {i}", lang="en") for i in range(120)])
    fg, closing = Foreground(), threading.Event()
    batches: list[float] = []

    def embed(texts):
        batches.append(time.perf_counter())
        time.sleep(0.02)  # a slow encoder: a batch takes a while
        return np.tile(np.eye(1, 4, 0, np.float32), (len(texts), 1))

    background = Store(store.path)
    vi = VectorIndex(background, embed, model="fake", dim=4)
    total = vi.pending()
    done = []
    worker = threading.Thread(target=lambda: done.append(vi.refresh(stop=fg.between(closing.is_set), batch=2)))
    worker.start()
    while not batches:
        time.sleep(0.01)
    llm = SlowLLM([{"evidence": [1], "choice": "A"}], fg)
    asking = Asking(Answerer(store, clock, AnswerSettings(planner="rule"), llm), clock, asker="A1_X", budget=5,
                    foreground=fg)
    before = len(batches)
    a = asking.answer(Query("Who held the drill?", W + 7_200_000, ("X", "Y"), asker="A1_X"))
    during = len(batches) - before
    worker.join(60)
    background.close()
    assert a.status == "ok" and a.choice == "A" and llm.busy_seen == [True]  # the question was answered, in flight
    assert during <= 1  # at most the batch already under way when the question came
    assert done == [total] and total > 40  # and the backlog was finished after it
    assert fg.counts["pauses"] >= 1


class BackgroundLLM(FakeLLM):
    """A consolidation model that writes slowly and gives way as the real one does: between
    tokens, when `yield_to()` says a question is in flight."""

    def __init__(self, replies):
        super().__init__(replies)
        self.started: list[tuple[int, bool]] = []
        self.fg: Foreground | None = None

    def json(self, messages, schema, *, yield_to=None, priority=LOW, **kw):
        self.started.append((len(self.started), self.fg.busy()))
        for _ in range(20):
            if priority == LOW and yield_to and yield_to():
                raise ModelPreempted("a question is in flight")
            time.sleep(0.02)
        return schema.model_validate(self.replies[0]), Usage(100, 10, 0.4)


def test_no_window_starts_while_a_question_is_in_flight(store, clock):
    for k in range(6):
        store.add([
            Observation("A1_JAKE", "caption", W + k * 600_000 + 1000, W + k * 600_000 + 2000,
                        "I pick up the screwdriver", lang="en"),
            Observation("A2_ALICE", "transcript", W + k * 600_000 + 5000, W + k * 600_000 + 6000,
                        "Pass me the screws", speaker="Alice", lang="en"),
        ])
    reply = {"events": [{"who": ["Jake", "Alice"], "what": "Jake picked up the screwdriver and Alice asked for screws",
                         "where": "", "how": ""}]}
    fg = Foreground()
    llm = BackgroundLLM([reply])
    llm.fg = fg
    background = Store(store.path)
    cons = Consolidator(EventStore(background), llm, clock, ConsolidationSettings(), foreground=fg)
    statuses: list[str] = []

    def catch_up():  # as the daemon's scheduler does: a preempted pass is run again
        while True:
            rs = cons.run(until_ms=W + 6 * 600_000)
            statuses.extend(r.status for r in rs)
            if not any(r.status == "preempted" for r in rs):
                return

    worker = threading.Thread(target=catch_up)
    worker.start()
    while len(llm.started) < 2:
        time.sleep(0.01)
    with fg.question():
        time.sleep(1.0)  # five windows' worth of the fake model's time
    worker.join(60)
    background.close()
    assert not any(busy for _, busy in llm.started)  # no window's prompt began during the question
    assert "preempted" in statuses  # the one under way gave way at its next token
    assert statuses.count("written") == 6 and len(EventStore(store).pending_windows(W + 6 * 600_000)) == 0
