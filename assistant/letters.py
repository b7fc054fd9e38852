"""Multiple choice read from the letters' probabilities: whether a model can be scored here, and the
letters averaged over the options' cyclic orders."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from assistant.prompts import ANSWER_PREFIX
from models.llm import LocalLLM
from models.scoring import log_softmax, score_choices

LETTERS = "ABCD"


def can_score(llm) -> bool:
    """Whether the model's prompts are rendered here (its own chat template), as scoring needs;
    another (a `chat_format` set by hand, a scripted stand-in) generates the letter instead."""
    prompts = getattr(llm, "prompts", None)
    return bool(prompts is not None and prompts.enabled)


def cyclic_letters(llm: LocalLLM, messages_for: Callable[[tuple[int, ...]], list[dict]], n: int,
                   given: list[float]) -> tuple[list[float], float]:
    """Each option's letter probability averaged over the n cyclic orders of the options (each option
    is read once under every letter), so that a small model's leaning towards "A" cancels out.
    `given`: the letters' log-probabilities in the given order, already read; the other orders
    re-read only the options and what follows them (the evidence stays in the model's state).
    Returns (each option's mean log-probability among the letters, seconds)."""
    total, seconds = np.zeros(n), 0.0
    for shift in range(n):
        order = tuple((k + shift) % n for k in range(n))
        if shift:
            sc, u = score_choices(llm, messages_for(order), ANSWER_PREFIX, list(LETTERS[:n]), [], with_options=False)
            lp, seconds = np.asarray(sc.letters, dtype=np.float64), seconds + u.seconds
        else:
            lp = np.asarray(given[:n], dtype=np.float64)
        lp = log_softmax(lp)  # among the n letters
        for k, i in enumerate(order):
            total[i] += lp[k] / n
    return [round(float(x), 4) for x in total], seconds
