"""The frames an answer shows: the stored frames nearest in time to its evidence, and, with an
image-text embedder configured, the frames whose vectors are nearest to the question."""

from __future__ import annotations

import logging

from assistant.query import Query
from memory.clock import HouseClock
from memory.frames import Frame, FrameStore
from memory.records import Unit
from models.errors import ModelError

logger = logging.getLogger(__name__)


class FrameFinder:
    def __init__(self, frames: FrameStore, embedder=None, *, per_answer: int = 6, by_text: int = 3):
        self.frames, self.embedder = frames, embedder
        self.per_answer, self.by_text = per_answer, by_text

    def find(self, q: Query, evidence: list[Unit]) -> list[tuple[Frame, str, float | None]]:
        """(frame, why, cosine distance or None): near the evidence first, in its order; then by text."""
        out: dict[int, tuple[Frame, str, float | None]] = {}
        for f in self.frames.for_evidence(evidence[:self.per_answer], as_of_ms=q.as_of_ms):
            out.setdefault(f.id, (f, "near_evidence", None))
        if self.embedder is not None:
            try:
                vec = self.embedder.embed_texts([q.question])[0]
                for f, d in self.frames.search(vec, k=self.by_text, as_of_ms=q.as_of_ms, agents=q.agents):
                    out.setdefault(f.id, (f, "matches_question", round(float(d), 4)))
            except ModelError:
                logger.exception("frame search by text failed")
        return list(out.values())[:self.per_answer + self.by_text]


def frames_json(found: list[tuple[Frame, str, float | None]], clock: HouseClock) -> list[dict]:
    return [f.as_json(clock, why=why, **({"distance": d} if d is not None else {})) for f, why, d in found]
