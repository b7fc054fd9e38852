"""Records of the memory: observations in, fine units (segments) and events out."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from memory.errors import RecordError

KINDS = ("caption", "transcript", "frame_caption")
SEGMENT_MS = 30_000
WINDOW_MS = 600_000


@dataclass(frozen=True, slots=True)
class Observation:
    """One caption, transcript line or frame caption of one agent."""

    agent: str
    kind: str
    start_ms: int
    end_ms: int
    text: str
    speaker: str | None = None
    lang: str | None = None
    ext_id: str | None = None

    def check(self) -> None:
        if self.kind not in KINDS:
            raise RecordError(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if not self.agent:
            raise RecordError("observation without an agent")
        if not self.text or not self.text.strip():
            raise RecordError("observation with empty text")
        if self.end_ms < self.start_ms:
            raise RecordError(f"end {self.end_ms} is before start {self.start_ms}")

    def key(self) -> str:
        """The dedup key within the agent: its external id, else a hash of what it says."""
        if self.ext_id:
            return self.ext_id
        raw = "\x1f".join(
            str(x) for x in (self.kind, self.start_ms, self.end_ms, self.text, self.speaker, self.lang)
        )
        return "sha1:" + hashlib.sha1(raw.encode()).hexdigest()

    def render(self) -> str:
        """How the observation reads inside a unit of context."""
        return f"{self.speaker}: {self.text}" if self.kind == "transcript" and self.speaker else self.text


@dataclass(frozen=True, slots=True)
class Unit:
    """A fine unit of context (a 30-second segment of one agent) as handed to the answerer."""

    id: int
    agent: str
    start_ms: int
    end_ms: int
    text: str
    obs_ids: tuple[int, ...] = ()
    score: float = 0.0
    extra: dict = field(default_factory=dict)


def segment_start(ms: int) -> int:
    return ms - ms % SEGMENT_MS


def window_start(ms: int) -> int:
    return ms - ms % WINDOW_MS
