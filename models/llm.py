"""The local LLM (llama-cpp-python, GGUF) behind a small synchronous class.

Every structured call is constrained by a grammar made from a pydantic model's JSON schema, so
its reply always parses. One instance serves every caller: a priority gate lets a question
(priority HIGH) go before background consolidation (LOW), and a LOW generation already running
gives way at the next token when a HIGH caller waits (it raises `ModelPreempted`; the caller
tries again later). A generation that runs past its time limit raises `ModelTimeout`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from models.errors import ModelError, ModelTimeout
from models.lifetime import close_at_exit, free_llama
from models.prefix import PromptCache, Stopped

logger = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)
_CONTROL = re.compile(r"[\x00-\x1f]")
HIGH, LOW = 0, 1


class ModelPreempted(ModelError):
    """A low-priority generation stopped so that a question could use the model."""


class ModelCutShort(ModelError):
    """The reply reached `max_tokens` before its JSON was complete."""


class ModelLooping(ModelError):
    """The reply went round in a loop ("The answer is: The answer is: ..."); generation stopped
    early. `partial` holds what was written."""

    def __init__(self, message: str, partial: str = ""):
        super().__init__(message)
        self.partial = partial


def looping(text: str, times: int = 4, longest: int = 40) -> bool:
    """Whether the end of `text` is one run of 3 to `longest` characters repeated `times` times."""
    tail = text[-times * longest:]
    for size in range(3, longest + 1):
        unit = tail[-size:]
        if len(tail) >= size * times and tail.endswith(unit * times) and unit.strip():
            return True
    return False


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached_tokens: int = 0  # prompt tokens found in the model's state (the prompt cache), not evaluated

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.seconds += other.seconds
        self.cached_tokens += other.cached_tokens


class PriorityGate:
    """A lock that hands the model to waiting HIGH callers before LOW ones."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self.waiting = [0, 0]

    def acquire(self, priority: int, timeout: float | None = None) -> bool:
        """True once the model is this caller's; False if `timeout` seconds passed first."""
        with self._cond:
            self.waiting[priority] += 1
            try:
                free = self._cond.wait_for(
                    lambda: not (self._busy or (priority == LOW and self.waiting[HIGH])), timeout)
            finally:
                self.waiting[priority] -= 1
            if free:
                self._busy = True
            return free

    def release(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()


class LocalLLM:
    """One loaded GGUF model. Synchronous; async callers move calls off the event loop."""

    def __init__(
        self, path: str | Path, *, n_ctx: int = 8192, n_threads: int | None = None, n_gpu_layers: int = 0,
        seed: int = 0, temperature: float = 0.0, time_limit_s: float = 180.0, chat_format: str | None = None,
        repeat_penalty: float = 1.1, flash_attn: bool = False,
    ):
        from llama_cpp import Llama  # heavy: only when a model is wanted

        self.path = Path(path)
        t0 = time.perf_counter()
        try:
            self.llama = Llama(
                model_path=str(self.path), n_ctx=n_ctx, n_threads=n_threads or os.cpu_count(),
                n_gpu_layers=n_gpu_layers, seed=seed, chat_format=chat_format, verbose=False, flash_attn=flash_attn,
            )
        except (ValueError, RuntimeError) as e:
            raise ModelError(f"cannot load {self.path}: {e}") from None
        self.name = self.llama.metadata.get("general.name") or self.path.stem
        self.n_ctx = self.llama.n_ctx()
        self.seed, self.temperature, self.time_limit_s = seed, temperature, time_limit_s
        self.repeat_penalty = repeat_penalty
        self.gate = PriorityGate()
        self.closing = threading.Event()
        self._grammars: dict[type, object] = {}
        self.prompts = PromptCache(self.llama)
        self._closed = False
        close_at_exit(self)
        logger.info("loaded %s (%s) in %.1fs, n_ctx=%d", self.name, self.path.name, time.perf_counter() - t0, self.n_ctx)

    def close(self) -> None:
        """Frees the model now (rather than in a finaliser at interpreter exit, when llama.cpp's
        own bindings may already be gone); at exit this runs by itself (`models.lifetime`). A
        generation still running gets until its next token to stop."""
        if self._closed:
            return
        self.closing.set()
        if not self.gate.acquire(LOW, timeout=10):
            logger.warning("%s still generating: left to its finaliser", self.name)
            return
        try:
            free_llama(self.llama)
            self._closed = True
        finally:
            self.gate.release()

    # -- tokens -------------------------------------------------------------------------
    def _open(self):
        """The llama, or ModelError once closed (a freed model must never be called: it crashes)."""
        if self._closed:
            raise ModelError(f"{self.name} is closed")
        return self.llama

    def count(self, text: str) -> int:
        return len(self._open().tokenize(text.encode("utf-8"), add_bos=False, special=False)) if text else 0

    def trim(self, text: str, max_tokens: int) -> str:
        """The text cut to at most `max_tokens` tokens (whole characters kept)."""
        toks = self._open().tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if len(toks) <= max_tokens:
            return text
        return self.llama.detokenize(toks[:max_tokens]).decode("utf-8", errors="ignore")

    def prompt_tokens(self, messages: list[dict]) -> int:
        return sum(self.count(m["content"]) + 4 for m in messages) + 2

    # -- generation ---------------------------------------------------------------------
    def json(
        self, messages: list[dict], schema: type[T], *, max_tokens: int = 512, priority: int = HIGH,
        time_limit_s: float | None = None, repeat_penalty: float | None = None, stop: list[str] | None = None,
        stop_loops: bool = False, yield_to: Callable[[], bool] | None = None, fresh: bool = False,
        temperature: float | None = None, seed: int | None = None,
    ) -> tuple[T, Usage]:
        """A reply that fits `schema`, generated under its grammar. `repeat_penalty` overrides the
        model's own for this call, `stop` ends the reply at any of its strings, and with `stop_loops`
        a reply that goes round in a loop stops early (`ModelLooping`). A LOW generation also gives
        way (`ModelPreempted`) whenever `yield_to()` says so (a question is in flight). `fresh`:
        nothing the context held is reused but the prompt's saved head (`PromptCache.prepare`).
        `temperature` and `seed` override the model's own for this call (another sample of a reply)."""
        sampling = {"repeat_penalty": repeat_penalty or self.repeat_penalty, "stop": stop, "stop_loops": stop_loops,
                    "temperature": self.temperature if temperature is None else temperature,
                    "seed": self.seed if seed is None else seed}
        text, usage = self._generate(messages, self._grammar(schema), max_tokens, priority, time_limit_s, sampling,
                                     yield_to, fresh)
        text = _CONTROL.sub(" ", text)  # the grammar lets raw control characters into strings
        try:
            return schema.model_validate_json(text), usage
        except ValidationError as e:  # only when max_tokens cut the JSON short
            raise ModelCutShort(
                f"reply does not fit {schema.__name__} ({len(text)} chars): {e.errors()[0]['msg']}"
            ) from None

    def text(
        self, messages: list[dict], *, max_tokens: int = 256, priority: int = HIGH, time_limit_s: float | None = None
    ) -> tuple[str, Usage]:
        return self._generate(messages, None, max_tokens, priority, time_limit_s, {
            "repeat_penalty": self.repeat_penalty, "temperature": self.temperature, "seed": self.seed})

    def _grammar(self, schema: type[BaseModel]):
        if schema not in self._grammars:
            from llama_cpp import LlamaGrammar

            self._grammars[schema] = LlamaGrammar.from_json_schema(
                json.dumps(schema.model_json_schema()), verbose=False
            )
        return self._grammars[schema]

    def _generate(self, messages, grammar, max_tokens, priority, time_limit_s, sampling,
                  yield_to: Callable[[], bool] | None = None, fresh: bool = False) -> tuple[str, Usage]:
        limit = time_limit_s or self.time_limit_s
        room = self.n_ctx - self.prompt_tokens(messages)
        if room < 16:
            raise ModelError(f"prompt of ~{self.n_ctx - room} tokens leaves no room in n_ctx={self.n_ctx}")
        if self.closing.is_set():  # the process is stopping: no new prompt to evaluate
            raise ModelPreempted("the process is stopping")

        def give_way() -> bool:
            return priority == LOW and bool(self.gate.waiting[HIGH] or (yield_to and yield_to()))

        if give_way():
            raise ModelPreempted("a question is in flight")
        self.gate.acquire(priority)
        t0 = time.perf_counter()
        stop_loops = sampling.pop("stop_loops", False)
        parts: list[str] = []
        n = cached = 0
        stream = rendered = None
        try:
            rendered = self.prompts.tokens(messages) if self.prompts.enabled else None
            if rendered is not None:
                # the fixed head from the cache; a LOW prompt's rest in chunks, giving way between them
                cached = self.prompts.prepare(*rendered, stop=(
                    lambda: give_way() or self.closing.is_set()) if priority == LOW else None, fresh=fresh)
            elif fresh:
                self._open().n_tokens = 0
            stream = self._open().create_chat_completion(
                messages, grammar=grammar, max_tokens=min(max_tokens, room), stream=True, **sampling,
            )
            for chunk in stream:
                delta = chunk["choices"][0]["delta"].get("content")
                if delta:
                    parts.append(delta)
                    n += 1
                    if stop_loops and n % 8 == 0 and looping("".join(parts[-64:])):
                        raise ModelLooping(f"the reply loops after {n} tokens", "".join(parts))
                if time.perf_counter() - t0 > limit:
                    raise ModelTimeout(f"generation passed its limit of {limit:.0f}s after {n} tokens")
                if give_way():
                    raise ModelPreempted("a question is waiting for the model")
                if self.closing.is_set():
                    raise ModelPreempted("the process is stopping")
        except Stopped:
            raise ModelPreempted("a question is waiting for the model (during the prompt)") from None
        finally:
            if stream is not None:  # a generation cut short: not left suspended, holding the model, until exit
                stream.close()
            self.gate.release()
        usage = Usage(len(rendered[0]) if rendered else self.prompt_tokens(messages), n, time.perf_counter() - t0,
                      cached)
        return "".join(parts), usage


_shared: dict[tuple, LocalLLM] = {}
_shared_lock = threading.Lock()


def shared_llm(path: str | Path, **kw) -> LocalLLM:
    """One instance per (file, settings) in this process: a model loads once."""
    key = (str(path), tuple(sorted(kw.items())))
    with _shared_lock:
        if key not in _shared:
            _shared[key] = LocalLLM(path, **kw)
        return _shared[key]
