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
from dataclasses import replace

from assistant.context import PAST_OF, english_first, is_cjk, speaker_of, unit_lines
from assistant.query import Query, person_name, question_word
from assistant.temporal import _NUM, CUE_WORDS, PARTS, Intent
from memory.records import Unit
from memory.tokenize import query_tokens

_TALK = re.compile(r"\b(?:talk(?:s|ed|ing)?|discuss(?:es|ed|ing)?|chat(?:s|ted|ting)?|says?|said|"
                   r"mention(?:s|ed)?|told|tell|conversation)\b", re.I)


def asks_talk(question: str) -> bool:
    """A "what" question about what was said: "What were we talking about ...?", "What did Tasha say ...?"."""
    return question_word(question) == "what" and bool(_TALK.search(question))


# words that say when, never what about: "at lunch on DAY1", "this morning", "two hours ago"
_WHEN_TOKENS = frozenset(query_tokens(" ".join((*CUE_WORDS, *PARTS, *_NUM))))
_DAY_TOKEN = re.compile(r"^(day)?\d+$")


def topic(q: Query, ignore: frozenset[str] | set[str]) -> set[str]:
    """The words of a question about talk that say what the talk was about, less `ignore` (names,
    generic words): none for "What were we talking about at lunch on DAY1?"."""
    return {t for t in query_tokens(_TALK.sub(" ", q.question))
            if t not in ignore and t not in _WHEN_TOKENS and not _DAY_TOKEN.match(t)}


def asks_span(q: Query, intent: Intent, ignore: frozenset[str] | set[str]) -> bool:
    """A question about what was said in a span of time that names no topic ("What were we talking
    about at lunch on DAY1?", "What did we discuss this morning?"): its evidence is the talk of
    the span, not the lines that hold its words ("lunch" finds "Are we providing lunch?")."""
    return asks_talk(q.question) and intent.lo is not None and intent.hi is not None and not topic(q, ignore)


def span_of(q: Query, intent: Intent, ignore: frozenset[str] | set[str]) -> tuple[int, int] | None:
    """(start, end) of a question about what was said in a span that names no topic (`asks_span`),
    the end no later than the question's time; None for any other question."""
    return (int(intent.lo or 0), min(int(intent.hi or 0), q.as_of_ms)) if asks_span(q, intent, ignore) else None


def named(q: Query, agents: list[str]) -> frozenset[str]:
    """The people of `agents` the question names, as speakers are labelled ("Katrina")."""
    asked = set(query_tokens(q.question))
    return frozenset(n for n in map(person_name, agents) if set(query_tokens(n)) <= asked)


def speech_only(u: Unit) -> Unit | None:
    """The unit with its lines of speech alone; None when it has none."""
    said = [line for line in unit_lines(u) if speaker_of(line)]
    return replace(u, text="\n".join(said)) if said else None


def across(units: list[Unit], lo: int, hi: int, most: int, asker: str | None = None,
           speakers: frozenset[str] = frozenset()) -> list[Unit]:
    """Up to `most` units of speech spread over [lo, hi): the span cut in `most` equal parts, in each
    the unit whose speech holds the most distinct words (one where `speakers` speak first; the
    asker's own view first among equals: it is the one written in the asker's words), in time order."""
    talk = [t for u in units if (t := speech_only(u)) is not None]
    if not talk or hi <= lo:
        return []
    width = max(1, (hi - lo) // most)
    best: dict[int, tuple[tuple[bool, int, bool], Unit]] = {}
    for u in talk:
        part = min(most - 1, max(0, (u.start_ms - lo) // width))
        key = (bool(speakers & {speaker_of(line) for line in unit_lines(u)}), len(set(query_tokens(u.text))),
               u.agent == asker)
        if part not in best or key > best[part][0]:
            best[part] = (key, u)
    return [u for _, (_, u) in sorted(best.items())]


def said_by(line: str) -> tuple[str, str]:
    """(speaker, words) of a line of speech ("Jake: Are we providing lunch?")."""
    return speaker_of(line) or "", re.split(r"[:：]\s", line, maxsplit=1)[-1].strip()


def turns(u: Unit) -> list[tuple[str, str]]:
    """(speaker, words) of the unit's speech, a speaker's lines in a row joined into one turn ("So if
    anyone has any ideas," + "like short videos you've seen before,"), a Chinese line whose English
    twin stands beside it left out."""
    out: list[tuple[str, str]] = []
    for line in english_first([line for line in unit_lines(u) if speaker_of(line)]):
        who, words = said_by(line)
        if out and out[-1][0] == who and is_cjk(out[-1][1]) == is_cjk(words):
            out[-1] = (who, _joined(out[-1][1], words))
        else:
            out.append((who, words))
    return out


def _joined(before: str, after: str) -> str:
    """Two lines of one turn as one text: a line that ends without a mark and a next that starts a
    sentence get a full stop between them ("... connected to nature" + "So that's my idea")."""
    if is_cjk(after):
        return before + ("" if before[-1:] in "，。！？、,.!?" else "，") + after
    if before[-1:] not in ".!?,;:…" and after[:1].isupper():
        before += "."
    return f"{before} {after}"


def _size(words: str) -> int:
    """A turn's length in words (two Chinese characters count as one)."""
    return len(_CJK_CHAR.findall(words)) // 2 + len(re.findall(r"[A-Za-z0-9']+", words))


_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def best_turn(u: Unit, longest: int, speakers: frozenset[str] = frozenset()
              ) -> tuple[tuple[bool, bool, int], str, str] | None:
    """The unit's turn that says the most in at most `longest` words, one of `speakers` first (the
    people the question names), then an English one (the asker reads it); (its rank key, speaker,
    words), None when the unit has no speech."""
    ranked = [((who in speakers, not is_cjk(words), len(set(query_tokens(words)))), who, words)
              for who, words in turns(u) if _size(words) <= longest]
    return max(ranked, key=lambda r: r[0]) if ranked else None


def quotes(units: list[Unit], most: int = 3, longest: int = 24, speakers: frozenset[str] = frozenset()
           ) -> list[tuple[int, str, str]]:
    """The `most` units that say the most (each by its `best_turn`), in time order: (index in
    `units`, speaker, words)."""
    picks = [(key, i, who, words) for i, u in enumerate(units)
             if (b := best_turn(u, longest, speakers)) for key, who, words in [b]]
    top = sorted(picks, key=lambda p: p[0], reverse=True)[:most]
    return [(i, who, words) for _, i, who, words in sorted(top, key=lambda p: units[p[1]].start_ms)]


def span_sentence(units: list[Unit], lo: int, hi: int, label: Callable[[int], str], most: int = 3,
                  speakers: frozenset[str] = frozenset()) -> tuple[str, list[int]]:
    """What was said over [lo, hi), told by a few of its turns in time order: 'From 11:00 to 13:00
    on DAY1, the talk went: at 11:41 Lucia said "..."; at 12:10 Katrina said "..."'; and the
    numbers (1-based) of the units quoted. Empty when no unit holds a turn short enough to quote."""
    picked = quotes(units, most, speakers=speakers)
    if not picked:
        return "", []
    day, _, start = label(lo).partition(" ")
    end_day, _, end = label(hi).partition(" ")
    end = "midnight" if end_day != day and label(hi - 1).partition(" ")[0] == day else end[:5]  # "to 00:00 on DAY2"
    span = f"From {start[:5]} to {end} on {day}" if end_day == day or end == "midnight" \
        else f"From {day} {start[:5]} to {end_day} {end}"
    said = "; ".join(f'at {label(units[i].start_ms).partition(" ")[2][:5]} {who} said "{words.rstrip(" ,;")}"'
                     for i, who, words in picked)
    return f"{span}, the talk went: {said}" + ("" if said.endswith(('."', '?"', '!"')) else "."), \
        [i + 1 for i, _, _ in picked]


# an irregular past as its present, which the stemmer leaves apart ("drew"/"draw"); not those that are
# as often a noun or a direction ("left", "found", "saw", "rose")
_PAST = {past: words[0] for past, base in PAST_OF.items()
         if past not in {"left", "found", "saw", "lay", "rose"} and (words := query_tokens(base))}
# a question whose answer is a number or a day: "How many ...?", "Which day ...?"
_ASKS_NUMBER = re.compile(r"\b(?:how (?:many|much|long|old|often)|(?:which|what) (?:day|date|time|number))\b", re.I)


def _words(text: str, numbers: bool = False) -> set[str]:
    """The tokens that can say something: the present of an irregular past; numbers and day labels
    only with `numbers`."""
    words = (_PAST.get(t, t) for t in query_tokens(text))
    return {w for w in words if (numbers if _DAY_TOKEN.match(w) else len(w) > 2)}


def brings_nothing(sentence: str, q: Query, ignore: frozenset[str] | set[str]) -> bool:
    """Whether the sentence holds no word but the question's own and those of `ignore` (names,
    generic and time words): "Jake was talking about lunch on DAY1." to "What were we talking
    about at lunch on DAY1?", "Katrina drew the last time she was at the whiteboard on DAY5." to
    "What did Katrina draw the last time she was at the whiteboard?"."""
    numbers = bool(_ASKS_NUMBER.search(q.question))  # then a count or a day is the answer, not a time
    return not _words(sentence, numbers) - _words(q.question, numbers) - ignore


def reported(units: list[Unit], q: Query, label: Callable[[int], str], ignore: frozenset[str] | set[str],
             most: int = 2) -> str | None:
    """The first excerpt's lines of speech (up to `most`) that share a word with the question, not
    counting `ignore` or the talk words, told as who said them and when; None when no excerpt has one."""
    wanted = set(query_tokens(_TALK.sub(" ", q.question))) - ignore
    for u in units:
        lines = [line for line in unit_lines(u) if speaker_of(line) and wanted & set(query_tokens(line))][:most]
        if lines:
            return _told(u, lines, label)
    return None


def _told(u: Unit, lines: list[str], label: Callable[[int], str]) -> str:
    """'At 11:53 on DAY1, Jake said: "..."; Katrina: "..."'."""
    said: list[tuple[str, str]] = []
    for line in lines:
        who, words = said_by(line)
        if said and said[-1][0] == who:
            said[-1] = (who, f"{said[-1][1]} {words}")
        else:
            said.append((who, words))
    day, _, hms = label(u.start_ms).partition(" ")
    told = "; ".join(f'{who} said: "{words}"' if j == 0 else f'{who}: "{words}"' for j, (who, words) in enumerate(said))
    return f"At {hms[:5]} on {day}, {told}"
