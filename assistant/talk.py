"""Open questions about what was said ("What were we talking about at lunch?", "What did Katrina
mention about fruit?"), told as who said what and when when the model only writes the question back.

Asked "What were we talking about at lunch on DAY1?", the 0.5B answerer wrote "Jake was talking
about lunch on DAY1." over excerpts that hold "Jake: Are we providing lunch?": a sentence that
brings nothing the question did not hold. The lines of speech that match the question are the
answer a person wants: 'At 11:53 on DAY1, Jake said: "Are we providing lunch? Everyone can come
after lunch."'
"""

from __future__ import annotations

import re
from collections.abc import Callable

from assistant.context import speaker_of, unit_lines
from assistant.query import Query, question_word
from memory.records import Unit
from memory.tokenize import query_tokens

_TALK = re.compile(r"\b(?:talk(?:s|ed|ing)?|discuss(?:es|ed|ing)?|chat(?:s|ted|ting)?|says?|said|"
                   r"mention(?:s|ed)?|told|tell|conversation)\b", re.I)


def asks_talk(question: str) -> bool:
    """A "what" question about what was said: "What were we talking about ...?", "What did Tasha say ...?"."""
    return question_word(question) == "what" and bool(_TALK.search(question))


def brings_nothing(sentence: str, q: Query, ignore: frozenset[str] | set[str]) -> bool:
    """Whether the sentence holds no word but the question's own and those of `ignore` (names,
    generic and time words): "Jake was talking about lunch on DAY1." to "What were we talking
    about at lunch on DAY1?"."""
    return not {t for t in query_tokens(sentence) if len(t) > 2} - set(query_tokens(q.question)) - ignore


def reported(units: list[Unit], q: Query, label: Callable[[int], str], ignore: frozenset[str] | set[str],
             most: int = 2) -> str | None:
    """The first excerpt's lines of speech (up to `most`) that share a word with the question, not
    counting `ignore` or the talk words, told as who said them and when; None when no excerpt has one."""
    wanted = set(query_tokens(_TALK.sub(" ", q.question))) - ignore
    for u in units:
        lines = [line for line in unit_lines(u) if speaker_of(line) and wanted & set(query_tokens(line))][:most]
        if not lines:
            continue
        said: list[tuple[str, str]] = []
        for line in lines:
            who, words = speaker_of(line) or "", re.split(r"[:：]\s", line, maxsplit=1)[-1].strip()
            if said and said[-1][0] == who:
                said[-1] = (who, f"{said[-1][1]} {words}")
            else:
                said.append((who, words))
        day, _, hms = label(u.start_ms).partition(" ")
        told = "; ".join(f'{who} said: "{words}"' if k == 0 else f'{who}: "{words}"'
                         for k, (who, words) in enumerate(said))
        return f"At {hms[:5]} on {day}, {told}"
    return None
