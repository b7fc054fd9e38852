"""Tokenization for lexical search over English and Chinese text.

English: lower-cased words, stop words dropped, Snowball-stemmed (PyStemmer). Chinese has no
spaces, so each run of CJK characters gives its characters (unigrams) and adjacent pairs
(bigrams): "螺丝刀" -> 螺 丝 刀 螺丝 丝刀. A mixed line yields both kinds.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import Stemmer

VERSION = "1"
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can could did didn't do does doesn't doing don't down during each
    few for from further had has have having he he'd he's her here hers herself him himself his how
    i i'd i'll i'm i've if in into is isn't it it's its itself just let's me more most my myself no
    nor not of off on once only or other ought our ours ourselves out over own same she she's should
    so some such than that that's the their theirs them themselves then there there's these they
    they're this those through to too under until up very was wasn't we we're were what what's when
    where which while who whom why with would you you're your yours yourself yourselves s t
    will shall may might must also yes yeah okay ok oh um uh hmm ah""".split()
)
# question words and options boilerplate that never help to find evidence
QUESTION_STOPWORDS = frozenset(
    "who whom whose what which when where why how did do does done happen happened thing things".split()
)

_stemmer = Stemmer.Stemmer("english")


def has_cjk(text: str) -> bool:
    """Whether the text holds a Chinese (CJK ideograph) character."""
    return _CJK.search(text) is not None


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


def tokenize(text: str, *, drop: frozenset[str] = frozenset()) -> list[str]:
    """Tokens of one text for BM25: stemmed English words, Chinese unigrams and bigrams."""
    text = unicodedata.normalize("NFKC", text).lower()
    out: list[str] = []
    for m in _WORD.finditer(text):
        w = m.group(0)
        if _CJK.match(w):
            out.extend(w)
            out.extend(w[i : i + 2] for i in range(len(w) - 1))
        elif w not in STOPWORDS and w not in drop:
            out.append(_stem(w.replace("'", "")))
    return out


def query_tokens(text: str) -> list[str]:
    """Tokens of a question: as `tokenize`, without the question words."""
    return tokenize(text, drop=QUESTION_STOPWORDS)


def estimate_tokens(text: str) -> int:
    """Rough LLM token count: one per CJK character, 1.3 per English word, one per 2 symbols.

    Used to report context size before a model's own tokenizer is at hand.
    """
    cjk = len(_CJK.findall(text))
    words = len(re.findall(r"[A-Za-z0-9]+", text))
    symbols = len(re.findall(r"[^\sA-Za-z0-9\u3400-\u9fff]", text))
    return cjk + round(words * 1.3) + (symbols + 1) // 2


def english_view(text: str, max_chars: int = 1200) -> str:
    """The lines of a unit that are mostly Latin script: what an English sentence encoder can read.
    Bilingual transcripts keep their English line; Chinese-only captions give ''."""
    out, n = [], 0
    for line in text.splitlines():
        letters = sum(c.isalpha() for c in line)
        if letters and len(_CJK.findall(line)) <= letters * 0.2:
            out.append(line.strip())
            n += len(line)
            if n >= max_chars:
                break
    return "\n".join(out)


MULTILINGUAL_VIEW = "1"  # bump when `multilingual_view` changes: vectors made from it are rebuilt
_SPEAKER = re.compile(r"^([^:：]{1,40})[:：]\s*")


def _latin(line: str) -> bool:
    letters = sum(c.isalpha() for c in line)
    return bool(letters) and len(_CJK.findall(line)) <= letters * 0.2


def multilingual_view(text: str, max_chars: int = 1000) -> str:
    """Every line of a unit, whatever its language, for a multilingual encoder; a line followed by
    its translation (a bilingual transcript, a caption and its English twin: a mostly-CJK line,
    then a Latin one of the same speaker) is said once, in the translation."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    out, n = [], 0
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if nxt and _CJK.search(line) and not _latin(line) and _latin(nxt) and _who(line) == _who(nxt):
            continue
        out.append(line)
        n += len(line) + 1
        if n >= max_chars:
            break
    return "\n".join(out)


def _who(line: str) -> str | None:
    m = _SPEAKER.match(line)
    return m.group(1) if m else None
