"""The fixed head of each prompt, kept in llama.cpp's state so it is evaluated once per process.

Every prompt of this project is fixed messages (a system prompt, a worked example) followed by
one variable message. llama-cpp-python already reuses the longest prefix that the context holds
from the previous call, but the roles take turns (planner, responder, consolidator), so each
call found the other's prompt there. Here the state right after the fixed part is saved once per
distinct head (only the head's KV cells: a few MB) and loaded back when a prompt starting with it
finds something else in the context. `LlamaRAMCache` was not used: it saves the whole state
after every completion (with a copy of the logits, 300 MB for a Qwen vocabulary) and would
match heads only through whatever full prompt happened to be cached.

The prompt is rendered as llama-cpp-python's chat handler renders it (the model's own Jinja
template); were the rendering to differ, only the reuse would shrink: `Llama.generate` compares
the real tokens and evaluates whatever differs. The rest of a background prompt is evaluated here
in chunks of `chunk` (128) tokens, asking `stop()` between chunks: a question (or the end of the
process) waits for at most one chunk of someone else's prompt, not for the whole of it.
"""

from __future__ import annotations

import ctypes
import logging
from collections import OrderedDict
from collections.abc import Callable

logger = logging.getLogger(__name__)


def common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PromptCache:
    """Saved states of prompt heads for one `Llama`; not thread-safe (the model's gate orders callers)."""

    def __init__(self, llama, *, max_heads: int = 6, chunk: int = 128):
        self.llama = llama
        self.max_heads, self.chunk = max_heads, min(chunk, llama.n_batch)
        self._heads: OrderedDict[tuple[int, ...], object] = OrderedDict()
        self._format = _formatter(llama)
        self.counts = {"loaded": 0, "saved": 0, "kept": 0}  # kept: the context already held the head

    @property
    def enabled(self) -> bool:
        return self._format is not None

    def tokens(self, messages: list[dict]) -> tuple[list[int], int] | None:
        """(the prompt's tokens, how many of them are its fixed head), as the chat handler makes
        them; None when this model's chat format is not rendered here."""
        if self._format is None:
            return None
        r = self._format(messages=messages)
        add_bos = not r.added_special
        toks = self.llama.tokenize(r.prompt.encode("utf-8"), add_bos=add_bos, special=True)
        last = messages[-1]["content"] if len(messages) > 1 else ""
        cut = r.prompt.rfind(last) if last else -1
        if cut <= 0:
            return toks, 0
        head = self.llama.tokenize(r.prompt[:cut].encode("utf-8"), add_bos=add_bos, special=True)
        return toks, max(0, common_prefix(head, toks) - 1)  # the boundary token may merge with what follows

    def prepare(self, toks: list[int], head: int, stop: Callable[[], bool] | None = None, fresh: bool = False) -> int:
        """Puts the prompt's head in the context (kept, loaded, or evaluated and saved) and, with
        `stop`, evaluates the rest but its last token in chunks, raising `Stopped` when `stop()`
        says so between chunks. Returns how many prompt tokens were in the context before this call
        evaluated any (the tokens a prompt cache saved).

        `fresh`: nothing the context held is reused but the saved head, so that the rest is evaluated
        from the head's end whatever ran before (another question, a consolidation prompt). With flash
        attention (the default), llama.cpp rounds a prompt's logits a little differently after other
        prompts went through the context: the default model's multiple-choice readings moved in their
        third decimal, enough to turn a close choice. The same question then gets the same answer
        whenever it is asked."""
        llama = self.llama
        if fresh:
            llama.n_tokens = 0
        have = common_prefix(llama.input_ids[: llama.n_tokens].tolist(), toks)
        key = tuple(toks[:head])
        if head and have >= head:
            self.counts["kept"] += 1
            self._heads.move_to_end(key, last=True) if key in self._heads else None
        elif head and key in self._heads:
            llama.load_state(self._heads[key])
            self._heads.move_to_end(key)
            self.counts["loaded"] += 1
            have = head
        elif head:
            llama.n_tokens = 0  # what eval() then overwrites: the context is rebuilt from the start
            self._eval(toks[:head], stop)
            self._save(key)
            have = 0
        if stop is not None:
            llama.n_tokens = min(llama.n_tokens, common_prefix(llama.input_ids[: llama.n_tokens].tolist(), toks))
            self._eval(toks[llama.n_tokens: len(toks) - 1], stop, self.chunk)
        return have

    def _eval(self, toks: list[int], stop: Callable[[], bool] | None, step: int | None = None) -> None:
        step = step or self.llama.n_batch
        for i in range(0, len(toks), step):
            if stop is not None and stop():
                raise Stopped
            self.llama.eval(toks[i:i + step])

    def _save(self, key: tuple[int, ...]) -> None:
        import llama_cpp
        import numpy as np
        from llama_cpp.llama import LlamaState

        llama = self.llama
        size = llama_cpp.llama_state_get_size(llama.ctx)
        buf = (ctypes.c_uint8 * size)()
        n = int(llama_cpp.llama_state_get_data(llama.ctx, buf, size))
        # no copy of the logits: the first token after the head is evaluated again, giving new ones
        self._heads[key] = LlamaState(input_ids=llama.input_ids.copy(), scores=np.zeros((1, llama.n_vocab()), np.single),
                                      n_tokens=llama.n_tokens, llama_state=ctypes.string_at(buf, n),
                                      llama_state_size=n, seed=0)
        self.counts["saved"] += 1
        while len(self._heads) > self.max_heads:
            self._heads.popitem(last=False)
        logger.debug("saved a prompt head of %d tokens (%d bytes)", len(key), n)

    def bytes(self) -> int:
        return sum(s.llama_state_size for s in self._heads.values())


class Stopped(Exception):
    """`stop()` said so between two chunks of a prompt."""


def _formatter(llama):
    """The Jinja formatter llama-cpp-python builds from the model's own template, or None when
    the model runs under another chat format (then nothing is cached here)."""
    template = llama.metadata.get("tokenizer.chat_template")
    if llama.chat_handler is not None or llama.chat_format != "chat_template.default" or not template:
        return None
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def text(tid: int) -> str:
        return llama.detokenize([tid], special=True).decode("utf-8", errors="ignore") if tid != -1 else ""

    eos, bos = llama.token_eos(), llama.token_bos()
    return Jinja2ChatFormatter(template=template, eos_token=text(eos), bos_token=text(bos), stop_token_ids=[eos])
