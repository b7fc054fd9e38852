"""Questions first: the signal that background work yields to.

One `Foreground` is made per process and handed to the parts that need it. The answering path
holds it for the whole of a question (`with foreground.question():` retrieval, planning and
answering); background work asks it between slices of its own: the embedder between batches
(`pause()` waits while a question is in flight), the consolidator before each window and, through
the model, between chunks of a prompt and between tokens (`busy`). The model's `PriorityGate`
still orders the model itself; this also keeps the cores free for a question's retrieval.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Foreground:
    """How many questions are in flight; background work waits while there is one."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._in_flight = 0
        self._closed = False
        self.counts = {"questions": 0, "pauses": 0}  # pauses: times background work waited for a question

    @contextmanager
    def question(self) -> Iterator[None]:
        """Held for the whole of one question, from any door."""
        with self._cond:
            self._in_flight += 1
            self.counts["questions"] += 1
        try:
            yield
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def busy(self) -> bool:
        """Whether a question is in flight (background work should not start a new slice)."""
        return self._in_flight > 0 and not self._closed

    def pause(self, timeout: float | None = None) -> bool:
        """Blocks while a question is in flight; True once none is (or the process is stopping),
        False when `timeout` seconds passed first."""
        with self._cond:
            if not self.busy():
                return True
            self.counts["pauses"] += 1
            return self._cond.wait_for(lambda: not self.busy(), timeout)

    def between(self, stop: Callable[[], bool]) -> Callable[[], bool]:
        """A `stop()` for work asked between its slices (an embedding backlog's batches): it first
        waits while a question is in flight, then says whether to stop."""

        def ask() -> bool:
            self.pause()
            return stop()

        return ask

    def close(self) -> None:
        """The process is stopping: nothing waits any more."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
