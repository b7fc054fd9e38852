"""Multiple choice by likelihood: the model reads the prompt once and the options are scored,
nothing is generated.

After the prompt and the start of the reply (e.g. "Answer:"), four readings of the same state:
- `letters`: the log-probability of each letter as the next token (" A", " B", ...), one
  forward pass for all options;
- `options`: the mean log-probability of each option's own words (" Alice"), each option's tokens
  in one batch from the same state (with every position's logits), so that an option is judged by
  what it says and not by its letter;
- `pmi`: the same words' total log-probability minus theirs after a prompt with no evidence and
  no question (the same system message, then `prefix`): what the evidence adds to each option,
  so that a short or common option does not win by being likely anywhere (Holtzman et al. 2021,
  "surface form competition");
- `totals`: the same words' total log-probability, the option's own probability: what a name
  needs, since the mean gives a name of two tokens (" T" + "asha") half the cost of its first
  and none for a second that follows it surely.
The neutral prompt is read first and the real one last, so the real prompt stays in the model's
state (a generation that follows reads none of it again); the fixed head comes from the prompt
cache like any other call's. Replies the model has just written to the real prompt are read the
other way round (`neutral_last`): that prompt is in its state already.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from models.errors import ModelError
from models.llm import HIGH, LocalLLM, Usage
from models.prefix import common_prefix


@dataclass
class Scores:
    letters: list[float]  # log-probability of each letter as the next token
    options: list[float]  # mean log-probability of each option's tokens
    pmi: list[float]  # their total log-probability less that after a prompt without evidence
    totals: list[float]  # their total log-probability: the option's own probability ("T" + "asha" for " Tasha")

    def pick(self, by: str) -> int:
        return int(np.argmax({"letter": self.letters, "likelihood": self.options, "pmi": self.pmi,
                              "total": self.totals}[by]))


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def score_choices(
    llm: LocalLLM, messages: list[dict], prefix: str, letters: list[str], options: list[str], *,
    priority: int = HIGH, with_options: bool = True, neutral: str = "Answer briefly.", fresh: bool = False,
    neutral_last: bool = False, most: int = 24,
) -> tuple[Scores, Usage]:
    """The scores of `letters` (each read as " X") and of `options` after `messages` and `prefix`;
    `neutral`: the user message of the prompt without evidence (with `with_options`); `fresh`: the
    context's reuse starts from the saved head (`PromptCache.prepare`), as a question's first call should;
    `neutral_last`: the neutral prompt read after the real one, for a prompt the model has just
    answered (in its state already) and that nothing reads after (replies it wrote); `most`: the
    tokens of an option that count."""
    llama = llm._open()
    rendered = llm.prompts.tokens(messages)
    if rendered is None:
        raise ModelError(f"{llm.name}: scoring needs the model's own chat template")
    after = llama.tokenize(prefix.encode("utf-8"), add_bos=False, special=False)
    toks, head = rendered
    toks = toks + after
    letter_ids = [llama.tokenize(f" {x}".encode(), add_bos=False, special=False)[0] for x in letters]
    if len(set(letter_ids)) != len(letter_ids):
        raise ModelError(f"{llm.name}: the letters are not one token each")
    conts = [llama.tokenize(f" {x}".encode(), add_bos=False, special=False)[:most] or (letter_ids or after)[:1]
             for x in options]
    if llm.closing.is_set():
        raise ModelError("the process is stopping")

    def base(first_call: bool) -> list[float]:  # each option's total after the prompt without evidence
        blank, blank_head = llm.prompts.tokens([*messages[:-1], {"role": "user", "content": neutral}])
        return [sum(x) for x in _continuations(llm, blank + after, blank_head, conts, first_call)[1]]

    llm.gate.acquire(priority)
    t0 = time.perf_counter()
    try:
        neutral_first = with_options and not neutral_last  # the first call is then the neutral prompt's
        base_lp = base(fresh) if neutral_first else []
        first, per_token, cached = _continuations(llm, toks, head, conts if with_options else [],
                                                  fresh and not neutral_first)
        base_lp = base(False) if with_options and neutral_last else base_lp
        letter_lp = [float(first[i]) for i in letter_ids]
    finally:
        llm.gate.release()
    option_lp = [sum(x) / len(x) for x in per_token]
    pmi = [sum(x) - b for x, b in zip(per_token, base_lp, strict=True)]
    usage = Usage(len(toks), 0, time.perf_counter() - t0, cached)
    return Scores(letter_lp, option_lp, pmi, [sum(x) for x in per_token]), usage


def _continuations(llm: LocalLLM, toks: list[int], head: int, conts: list[list[int]], fresh: bool = False):
    """(the log-probabilities of the next token after `toks`, each continuation's per-token
    log-probabilities, how many of `toks` the context already held); the context is left holding `toks`."""
    llama = llm.llama
    llm.prompts.prepare(toks, head, fresh=fresh)
    have = common_prefix(llama.input_ids[: llama.n_tokens].tolist(), toks)
    llama.n_tokens = min(have, len(toks) - 1)  # the last token again at least: its logits are wanted
    llama.eval(toks[llama.n_tokens:])
    first = log_softmax(_last_logits(llama))
    base, out = llama.n_tokens, []
    for cont in conts:
        got = [float(first[cont[0]])]
        if len(cont) > 1:  # the rest in one batch with the logits of every position
            llama._ctx.kv_cache_seq_rm(-1, base, -1)
            llama._batch.set_batch(batch=cont[:-1], n_past=base, logits_all=True)
            llama._ctx.decode(llama._batch)
            rows = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(len(cont) - 1, llama.n_vocab()))
            got += [float(log_softmax(rows[k])[t]) for k, t in enumerate(cont[1:])]
        out.append(got)
    llama._ctx.kv_cache_seq_rm(-1, base, -1)  # the context holds `toks` again (n_tokens was never moved)
    return first, out, have


def _last_logits(llama) -> np.ndarray:
    """The logits after the last token evaluated (llama.cpp keeps only those without logits_all)."""
    return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).copy()
