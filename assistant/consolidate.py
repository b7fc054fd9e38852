"""Consolidation: each closed 10-minute window of all agents becomes shared-memory events (4W1H).

The window's observations are fitted to a token budget: one language per line (English where a
translation exists), an utterance heard by several wearers counted once, captions and speech
thinned evenly over the window when too long. The model writes events under a JSON schema; they
replace the window's old events in one transaction, with the model, the prompt version and the
hash of the inputs. A window whose inputs hash as before is never rebuilt; a kill mid-window
leaves it pending, so the next run does it: no duplicate, no gap.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from assistant.config import ConsolidationSettings
from assistant.prompts import (
    CONSOLIDATE_EXAMPLE_REPLY,
    CONSOLIDATE_EXAMPLE_USER,
    CONSOLIDATE_SYSTEM,
    CONSOLIDATE_VERSION,
    events_schema,
)
from assistant.query import person_name, person_names
from memory.clock import HouseClock
from memory.events import Event, EventStore, WindowObservation
from memory.records import WINDOW_MS, clean_line
from memory.tokenize import tokenize
from models.errors import ModelError
from models.llm import LOW, LocalLLM, ModelCutShort, ModelPreempted
from models.yielding import Foreground

logger = logging.getLogger(__name__)
_NORM = re.compile(r"[\W_]+", re.U)


@dataclass
class WindowResult:
    start_ms: int
    status: str  # written | unchanged | dry-run | empty | error | preempted
    events: list[Event] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    lines: int = 0
    error: str = ""
    prompt: list[dict] | None = None


def input_hash(obs: list[WindowObservation], settings: ConsolidationSettings) -> str:
    h = hashlib.sha256(f"{CONSOLIDATE_VERSION}|{settings.input_tokens}|{settings.max_events}".encode())
    for o in obs:
        h.update(f"\x1e{o.id}\x1f{o.agent}\x1f{o.start_ms}\x1f{o.speaker}\x1f{o.text}".encode())
    return h.hexdigest()


def select_lines(obs: list[WindowObservation], clock: HouseClock) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(speech lines, sight lines) as (time, text): one language a moment, each utterance once."""
    english = {(o.agent, o.kind, o.start_ms) for o in obs if o.lang == "en"}
    name = person_names({o.agent for o in obs})
    speech, sight, heard = [], [], {}
    for o in obs:
        if o.lang != "en" and (o.agent, o.kind, o.start_ms) in english:
            continue  # the same moment has an English line
        hhmmss = clock.label(o.start_ms)[-8:]
        if o.kind == "transcript":
            key = (o.speaker, _NORM.sub("", o.text.lower()))
            if key in heard and o.start_ms - heard[key] <= 5_000:
                continue  # several wearers heard the same words
            heard[key] = o.start_ms
            who = person_name(o.speaker) if o.speaker else "Someone"
            speech.append((o.start_ms, f'{hhmmss} {who} said: "{o.text}"'))
        else:
            sight.append((o.start_ms, f"{hhmmss} [{name[o.agent]}] {o.text}"))
    return speech, sight


def fit_lines(speech, sight, budget: int, count: Callable[[str], int]) -> list[str]:
    """Both kinds thinned evenly over the window until they fit `budget` tokens, speech first."""
    cost = {id(x): count(x[1]) + 1 for x in speech + sight}
    total = lambda xs: sum(cost[id(x)] for x in xs)  # noqa: E731
    keep_speech = _thin(speech, min(total(speech), max(budget // 2, budget - total(sight))), cost)
    keep_sight = _thin(sight, budget - total(keep_speech), cost)
    return [text for _, text in sorted(keep_speech + keep_sight, key=lambda x: x[0])]


def _thin(lines: list, budget: int, cost: dict) -> list:
    if sum(cost[id(x)] for x in lines) <= budget:
        return list(lines)
    for step in range(2, len(lines) + 2):
        kept = lines[::step]
        if sum(cost[id(x)] for x in kept) <= budget:
            return kept
    return []


def build_prompt(
    window_start: int, lines: list[str], names: list[str], clock: HouseClock, *, example: bool = True
) -> list[dict]:
    label = clock.label(window_start)
    end = clock.label(window_start + WINDOW_MS)[-8:-3]
    head = f"Window: {label[:-3]}-{end}. People: {', '.join(names)}."
    shot = [
        {"role": "user", "content": CONSOLIDATE_EXAMPLE_USER},
        {"role": "assistant", "content": CONSOLIDATE_EXAMPLE_REPLY},
    ]
    return [
        {"role": "system", "content": CONSOLIDATE_SYSTEM},
        *(shot if example else []),
        {"role": "user", "content": head + "\n" + "\n".join(lines)},
    ]


class Consolidator:
    def __init__(self, events: EventStore, llm: LocalLLM | None, clock: HouseClock, settings: ConsolidationSettings,
                 *, foreground: Foreground | None = None):
        """`foreground`: questions in flight; no window starts while there is one, and a window's
        prompt gives way to it between chunks and tokens (the window is tried again after)."""
        self.events, self.llm, self.clock, self.settings = events, llm, clock, settings
        self.foreground = foreground

    def names(self, obs: list[WindowObservation]) -> list[str]:
        """The people of one window: its agents and speakers, never every agent ever seen (thousands
        of invented agent ids must not push the prompt past the model's context)."""
        agents = person_names({o.agent for o in obs}).values()
        return sorted(set(agents) | {person_name(o.speaker) for o in obs if o.speaker})

    def run(
        self, *, until_ms: int, start_ms: int | None = None, end_ms: int | None = None, dry_run: bool = False,
        force: bool = False, progress: Callable[[Iterable], Iterable] = iter,
        on_window: Callable[[WindowResult], None] | None = None,
    ) -> list[WindowResult]:
        windows = (self.events.windows(until_ms, start_ms, end_ms) if force or dry_run
                   else self._newest_first(until_ms, start_ms, end_ms))
        results = []
        for w in progress(windows):
            if self.foreground is not None:
                self.foreground.pause()  # questions first: no window starts while one is in flight
            r = self.window(w["start_ms"], w["input_hash"], dry_run=dry_run, force=force)
            results.append(r)
            if on_window:
                on_window(r)
            if r.status == "preempted":
                break
        return results

    def _newest_first(self, until_ms: int, start_ms: int | None, end_ms: int | None) -> Iterable[dict]:
        """Pending windows, newest first, asked again after each one: a window that closes during a
        long catch-up goes before the backlog, so back-dated data cannot hold today's memory hostage."""
        tried: set[int] = set()
        while True:
            todo = [w for w in self.events.pending_windows(until_ms, start_ms, end_ms, newest_first=True,
                                                           limit=len(tried) + 1) if w["start_ms"] not in tried]
            if not todo:
                return
            tried.add(todo[0]["start_ms"])
            yield todo[0]

    def window(self, start: int, old_hash: str | None, *, dry_run: bool = False, force: bool = False) -> WindowResult:
        rev, obs = self.events.observations(start)
        if not obs:
            self.events.mark_unchanged(start, rev)
            return WindowResult(start, "empty")
        digest = input_hash(obs, self.settings)
        if digest == old_hash and not force and not dry_run:
            self.events.mark_unchanged(start, rev)
            return WindowResult(start, "unchanged")
        count = self.llm.count if self.llm else _rough_count
        speech, sight = select_lines(obs, self.clock)
        lines = fit_lines(speech, sight, self.settings.input_tokens, count)
        names = self.names(obs)
        messages = build_prompt(start, lines, names, self.clock)
        prompt_tokens = sum(count(m["content"]) + 4 for m in messages)
        if dry_run or self.llm is None:
            return WindowResult(start, "dry-run", prompt_tokens=prompt_tokens, lines=len(lines), prompt=messages)
        busy = self.foreground.busy if self.foreground is not None else None
        try:
            try:
                reply, usage = self.llm.json(
                    messages, events_schema(tuple(names), self.settings.max_events),
                    max_tokens=self.settings.output_tokens, priority=LOW, yield_to=busy,
                )
            except ModelCutShort:  # it rambled past the token limit: ask again for fewer events
                reply, usage = self.llm.json(
                    messages, events_schema(tuple(names), 2), max_tokens=self.settings.output_tokens, priority=LOW,
                    yield_to=busy,
                )
        except ModelPreempted:
            return WindowResult(start, "preempted", lines=len(lines))
        except ModelError as e:
            logger.warning("window %s not consolidated: %s", self.clock.label(start), e)
            return WindowResult(start, "error", lines=len(lines), error=str(e))
        events = grounded(reply.events, lines, start, self.llm.name)
        model = self.llm.name
        if not events:  # nothing the model wrote is grounded in the window: keep what was said
            events = [extractive(speech, sight, start, names, model)]
            model += "+extractive"
        ids = self.events.replace(start, events, model=model, prompt_version=CONSOLIDATE_VERSION,
                                  input_hash=digest, rev=rev)
        stored = [Event(e.who, e.what, e.where, e.how, e.start_ms, e.end_ms, i, e.model) for e, i in zip(events, ids, strict=True)]
        return WindowResult(start, "written", stored, usage.prompt_tokens, usage.completion_tokens, usage.seconds,
                            len(lines))


def grounded(replies, lines: list[str], start: int, model: str) -> list[Event]:
    """The model's events that say something found in the window, each once.

    A small model sometimes copies the prompt's example, invents, or repeats itself; an event is
    kept when at least half of its content words occur in the window's lines and most of them are
    not the example's. A repeat is dropped, also one that only puts other people into the same
    sentence (the 0.5B model wrote "Jake and Tasha were friends, but ..." for five pairs of one
    window): its words other than names are those of an event kept before (Jaccard >= 0.8).
    """
    seen_words = set(tokenize(" ".join(lines)))
    out, seen, kept = [], set(), []
    for e in replies:
        who = tuple(dict.fromkeys(clean_line(n) for n in e.who if clean_line(n)))
        names = set(tokenize(" ".join(e.who)))  # a name alone says nothing about what happened
        words = {t for t in tokenize(e.what + " " + e.how) if not t.isdigit() and t not in names}
        words -= {"said", "say"}
        key = _NORM.sub("", e.what.lower())
        found = len(words & seen_words) / len(words) if words else 0.0
        copied = len(words & _EXAMPLE_WORDS) / len(words) if words else 1.0
        if found < 0.5 or copied >= 0.6 or key in seen or _repeats(words, names, kept):
            continue
        seen.add(key)
        kept.append((words, names))
        out.append(Event(who, clean_line(e.what), clean_line(e.where), clean_line(e.how), start, start + WINDOW_MS,
                         model=model))
    return out


def _repeats(words: set[str], names: set[str], kept: list[tuple[set[str], set[str]]]) -> bool:
    """Whether an event's words (its people's names left out) are those of one kept before, with
    the names of each left out of the other too; a sentence of fewer than 3 such words is never a
    repeat ("Tasha passed Alice the screws" and "Tasha passed Lucia the screws": the names are the
    content)."""
    for k_words, k_names in kept:
        a, b = words - k_names, k_words - names
        if min(len(a), len(b)) >= 3 and len(a & b) / len(a | b) >= 0.8:
            return True
    return False


_EXAMPLE_WORDS = set(tokenize(CONSOLIDATE_EXAMPLE_REPLY)) - set(tokenize("who what where how events Jake Alice Tasha"))


def extractive(speech, sight, start: int, names: list[str], model: str) -> Event:
    """A plain event from the window's own lines: who was there and the most telling lines."""
    lines = [t for _, t in speech] or [t for _, t in sight]
    toks = [set(tokenize(t)) for t in lines]
    central = sorted(range(len(lines)), key=lambda i: -sum(len(toks[i] & o) for o in toks))[:3]
    who = [n for n in names if any(n in t for t in lines)] or names
    what = " / ".join(re.sub(r"^\d\d:\d\d:\d\d ", "", lines[i]) for i in sorted(central))
    return Event(tuple(who), what[:400], "", "", start, start + WINDOW_MS, model=model + "+extractive")


def _rough_count(text: str) -> int:
    from memory.tokenize import estimate_tokens

    return estimate_tokens(text)


def now_ms() -> int:
    return int(time.time() * 1000)
