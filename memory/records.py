"""Records of the memory: observations in, fine units (segments) and events out."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from memory.errors import RecordError

KINDS = ("caption", "transcript", "frame_caption")
SEGMENT_MS = 30_000
WINDOW_MS = 600_000
# untrusted text is one line of data: control characters, line and paragraph separators, lone
# surrogates and non-characters could pose as other lines ("Question: ...", "[Alice] ...") in a prompt
_NOT_TEXT = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]+")


def clean_line(text: str) -> str:
    """`text` as one line: every run of control characters becomes one space; stripped."""
    return _NOT_TEXT.sub(" ", text).strip()


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


def joined(first: Unit, second: Unit) -> Unit:
    """One unit spanning two adjacent ones of the same agent (`first` earlier): the id and score
    of the one the search chose is kept by the caller; a line already said is not said again (a
    caption repeated within the minute is shown once too)."""
    seen = set(first.text.split("\n"))
    more = [line for line in second.text.split("\n") if line not in seen]
    text = "\n".join([first.text, *more]) if more else first.text
    return Unit(first.id, first.agent, first.start_ms, second.end_ms, text, first.obs_ids + second.obs_ids,
                first.score, first.extra)


def segment_start(ms: int) -> int:
    return ms - ms % SEGMENT_MS


def window_start(ms: int) -> int:
    return ms - ms % WINDOW_MS
