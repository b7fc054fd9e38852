"""The background indexer of the daemon: embeds new units on a connection of its own, so that a
question never waits for a backlog (at start-up: whatever arrived while the daemon was down)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from assistant.retrievers import Retrievers
from memory.db import is_full

logger = logging.getLogger(__name__)
TURN = 256  # rows each vector index embeds before the next one's turn: the encoders advance together


class Indexer:
    def __init__(self, serving: Retrievers, mine: Retrievers, *, every_s: float, stop: Callable[[], bool],
                 report: Callable[..., None]):
        """`serving`: the retrievers that answer questions (their encoder is loaded once and lent to
        `mine`, which writes the vectors); `stop()` ends a batch early when the process stops."""
        self.serving, self.mine, self.every_s, self.stop, self.report = serving, mine, every_s, stop, report

    async def run(self) -> None:
        second = self.serving.settings.second_encoder
        if not await asyncio.to_thread(self.serving.dense_ok) and not (
                second and await asyncio.to_thread(self.serving.dense_ok, second)):
            return
        while True:
            try:
                done = await asyncio.to_thread(self.mine.prepare, lexical=False, stop=self.stop, batch=32,
                                                step=TURN)
                if any(done.values()):
                    logger.info("embedded %s", done)
            except Exception as e:  # a full disk: the vectors wait, the daemon keeps serving
                full = is_full(e) or is_full(e.__cause__ or e)
                logger.warning("embedding paused (%s: %s)", type(e).__name__, e)
                self.report("disk_full" if full else "internal", f"embedding paused: {type(e).__name__}: {e}")
            await asyncio.sleep(self.every_s)
