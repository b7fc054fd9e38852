"""Never show garbage: what the model wrote is checked before anyone reads it.

`degenerate` says why a reply is unusable: empty, looping (a repeated n-gram such as "The answer
is: The answer is: ..."), an echo of the prompt's instructions or of the question, or text
outside the schema (JSON debris such as a trailing ` }`, once the harmless kind is trimmed by
`clean`). An unusable reply is replaced by an extractive answer built from the cited evidence:
who saw it, when, and the lines themselves. An answer that says nothing the evidence holds, to a
question none of whose words the evidence holds, is "I don't find this in the memory", with the
closest evidence; one that brings nothing of the evidence to a question the evidence does touch
is replaced by the evidence itself. A good answer is completed so that it reads as one: a
terse one with whose view and when, a longer one that names no time with when its evidence was
seen ("(around 18:07 on DAY1)"), a copied line of speech as who said it and when; a caption
copied beside it ("... for lunch. Jake turns on the faucet and laughs.") is left out, and a first
sentence that only writes the question back gives way to what follows it, or to the evidence
(to "what were we talking about", the lines said: `assistant.talk`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from assistant import talk
from assistant.address import addressed
from assistant.context import best_lines, is_cjk, speaker_of, unit_lines, view_of
from assistant.query import Query, person_name, question_word
from memory.records import Unit
from memory.tokenize import has_cjk, query_tokens

NOT_FOUND = "I don't find this in the memory."
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\W\d_]+|\d+")
_DEBRIS = re.compile(r"[{}\[\]]|\"\s*\w+\"\s*:|<\||\|>|\\[nt\"]")
# the prompt's own scaffolding copied into a reply: excerpt headers, the question line, the asker's
# line ("The asker is Jake: 'I', 'me', 'my' in the question mean Jake", copied in part)
_SCAFFOLD = re.compile(r"\b\w+'s view\b|\bquestion \(asked at|\b(?:excerpts|shared memory):|'i',\s*'me'|"
                       r"\bin the question means?\b", re.I)
_TRAILING = re.compile(r"[\s\"'`,;:{}\[\]]+$")
_LEADING = re.compile(r"^[\s\"'`,;:{}\[\]]+")
_CITES = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
# not after "..." ("It seems like... David Tao?"); after 。！？ with no space too
_SENTENCE = re.compile(r"(?<=[.!?])(?<!\.\.\.)\s+|(?<=[。！？])\s*(?=\S)")
_NO_ANSWER = re.compile(r"\b(i don'?t (?:know|find)|no information|not (?:mentioned|provided|in the (?:evidence|excerpts))|"
                        r"cannot (?:be )?(?:determined|answer)|can'?t (?:tell|answer))\b", re.I)
_TIME_WORDS = frozenset("""morning afternoon evening night noon midnight today yesterday tomorrow first last
    usually usual often always never time times ago earlier later recent recently before after day days week
    hour hours minute minutes""".split())
_TIME_TOKENS = frozenset(query_tokens(" ".join(_TIME_WORDS)))
# an answer that says when already ("this morning", "two hours ago", "on DAY2": the digit)
_SAYS_WHEN = re.compile(r"\b(?:today|tonight|yesterday|tomorrow|morning|afternoon|evening|night|noon|midnight|ago|"
                        r"earlier|later|just now)\b", re.I)
# a copied line of speech that no excerpt holds as said (`reported`): no time lent to it
_UNHELD = re.compile(r'^\S+ said: "')
# a habit has no one time ("What do I usually do ...?"), nor does a line of speech end with one
_HABIT = re.compile(r"\b(?:usually|usual|often|always|never|every|habitually|tend to)\b", re.I)
GENERIC = frozenset(query_tokens("""people person everyone someone something thing things time way same
    different reason talk talked talking said say says saying asked answer question day"""))
_QUOTED = re.compile(r"^([A-Z][\w'-]{0,30}):\s*(.+)$")  # "Jake: We can or we can't."
_VIEW_SHOWS = re.compile(r"\b([A-Z][\w-]*)'s view (?:shows|showed)(?: that)?\s+")  # "Katrina's view shows that ..."
_PREFIX = re.compile(r"^(?:the\s+)?answer(?:\s+is)?\s*[:：-]\s*", re.I)
# a phrase of 6 characters or more said again right after itself, as captions and transcripts
# sometimes hold it ("I'm using my phone I'm using my phone", "Egg tart crusts? Egg tart crusts")
_RERUN = re.compile(r"\b(\w.{4,78}?\w)([\s,.!?;:。，！？；、]+)\1\b(?:[\s,.!?;:。，！？；、]+\1\b)*", re.I)
_RERUN_CJK = re.compile(r"([\u3400-\u4dbf\u4e00-\u9fff]{3,30}?)(?:[\s，。！？；、]*\1)+")  # 社会问题社会问题
# how a reply is turned into the answer the asker reads
# (timed: an open "when" question told the time of its best excerpt, `assistant.when`)
# (quoted: a question about what was said in a span, told by a few turns of its talk, `assistant.talk`)
MODEL, EXTRACTIVE, NOT_FOUND_MODE, TIMED, QUOTED = "model", "extractive", "not_found", "timed", "quoted"


@dataclass
class Reply:
    """What the responder made of the model's reply."""

    text: str
    choice: str | None = None
    cites: list[int] = field(default_factory=list)
    mode: str = MODEL
    guard: str | None = None
    status: str = "ok"
    error: str = ""
    raw: str | None = None  # the model's own words when they were not shown
    scores: dict | None = None  # multiple choice by scoring: each reading's log-probabilities and pick


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def repeats(text: str, n: int = 3, times: int = 3) -> bool:
    """Some n-gram of words comes `times` times or more, or a short run of characters loops."""
    toks = tokens(text)
    grams = Counter(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))
    if grams and grams.most_common(1)[0][1] >= times:
        return True
    return bool(re.search(r"(.{2,30}?)\1{4,}", text, re.S))


def echoes(text: str, prompt: str, n: int = 4, share: float = 0.6) -> bool:
    """Most of the reply's word n-grams are copied from `prompt` (the instructions and question)."""
    toks = tokens(text)
    if len(toks) < n:
        return False
    ptoks = tokens(prompt)
    source = {tuple(ptoks[i:i + n]) for i in range(len(ptoks) - n + 1)}
    grams = [tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)]
    return sum(g in source for g in grams) >= share * len(grams)


def clean(text: str) -> str:
    """The reply without leading and trailing debris (a stray ` }`, quotes) and control characters;
    the excerpts' heading turned into words ("Katrina's view shows that they ..." -> "Katrina saw
    that they ...")."""
    text = _VIEW_SHOWS.sub(r"\1 saw that ", re.sub(r"\s+", " ", _CITES.sub("", text)))
    return _PREFIX.sub("", _LEADING.sub("", _TRAILING.sub("", text)).strip())


def without_asides(text: str, q: Query, units: list[Unit], share: float = 0.8) -> str:
    """The reply less the sentences after its first that copy an excerpt's line and share no word
    with the question but people's names: "Jake decides to eat KFC for lunch. Jake turns on the
    faucet and laughs." keeps the first (the second is a caption the small model copied beside
    its answer)."""
    first, *rest = _SENTENCE.split(text)
    names = {t for u in units for t in query_tokens(person_name(u.agent))}
    asked = set(query_tokens(q.question)) - names - GENERIC
    lines = [set(tokens(line)) for u in units for line in unit_lines(u)]

    def copied(sentence: str) -> list[bool]:
        words = tokens(sentence)
        return [len(words) >= 3 and sum(w in line for w in words) >= share * len(words) for line in lines]

    quoted = copied(first)  # a line of several sentences copied whole is one answer, not an aside

    def aside(sentence: str) -> bool:
        if set(query_tokens(sentence)) & asked:
            return False
        return any(c and not f for c, f in zip(copied(sentence), quoted, strict=True))

    return " ".join([first, *(p for p in rest if not aside(p))])


def without_echoes(text: str, prompt: str) -> str:
    """The reply less its sentences that copy the prompt ("What items were mentioned ...? Jake is
    holding a bottle of sparkling wine." keeps the second); as it is when every sentence does."""
    parts = _SENTENCE.split(text)
    kept = [p for p in parts if not echoes(p, prompt)]
    return " ".join(kept) if kept else text


def degenerate(text: str, prompt: str = "") -> str | None:
    """Why the (cleaned) reply cannot be shown, or None when it can."""
    t = clean(text)
    why = garbage(t)  # "not words": "20:34,567-89"
    if why in ("empty", "not words", "repeated"):
        return why
    if prompt and echoes(t, prompt):
        return "echo"
    return "outside schema" if why or _SCAFFOLD.search(t) else None


# a model reply's guard that says it degenerated (the kinds), not that it was unfounded
DEGENERATE_KINDS = ("empty", "not words", "repeated", "echo", "outside schema", "cut short")


def garbage(shown: str) -> str | None:
    """Why an answer as the asker reads it is garbage (empty, no words, looping, JSON debris), or None.
    The check on what is shown, whatever made it: the model, the time of an excerpt or the evidence
    itself (which may quote "Alice's view", so the prompt's scaffolding is no fault here)."""
    if not re.search(r"\w", shown):
        return "empty"
    visible = [c for c in shown if not c.isspace()]
    if sum(c.isalpha() for c in visible) < 0.5 * len(visible):
        return "not words"
    if repeats(shown):
        return "repeated"
    return "outside schema" if _DEBRIS.search(shown) else None


def unseen(q: Query, known: Callable[[str], bool], names: set[str]) -> list[str]:
    """The words of the question for things the memory has never held (two at least), when it holds
    others of its words (so it reads the question's language): "purple", "giraffe" in "Where did
    Jake hide the purple giraffe?".
    People and times are not things."""
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]+", q.question) if w.lower() not in _TIME_WORDS]
    stems = {w: [t for t in query_tokens(w) if t not in names] for w in words}
    stems = {w: ts for w, ts in stems.items() if ts}
    gone = [w for w, ts in stems.items() if not any(known(t) for t in ts)]
    # one unknown word is often one the memory holds only in Chinese (7 of the 171 EgoLifeQA DAY1
    # questions: "clerk", "bracelet", "cherries"); two are wanted
    return gone if 2 <= len(gone) < len(stems) else []


def says_nothing(text: str) -> bool:
    return bool(_NO_ANSWER.search(text))


def grounded(answer: str, q: Query, units: list[Unit]) -> tuple[bool, bool]:
    """(whether the answer brings content words of the evidence that the question does not hold,
    whether the question shares a content word with the evidence). People (but for a "who"
    question) and generic words aside;
    two words are wanted, one from an answer of three content words or fewer. Evidence mostly in
    Chinese cannot judge an English answer: it is taken as brought from the evidence."""
    names = {t for u in units for t in query_tokens(person_name(u.agent))}
    seen = {t for u in units for t in query_tokens(u.text)} - GENERIC
    if question_word(q.question) == "who":  # the answer to "who" is a person: the wearers count too
        seen, names = seen | names, set()
    seen -= names
    asked = set(query_tokens(q.question)) - names
    said = set(query_tokens(answer)) - names - asked - GENERIC
    lines = [line for u in units for line in unit_lines(u)]
    foreign = sum(map(is_cjk, lines)) * 2 >= len(lines) > 0 and not is_cjk(answer)
    return foreign or len(seen & said) >= min(2, max(1, len(said) - 2)), bool(seen & asked)


def unrepeated(line: str) -> str:
    """A line with a phrase that runs again right after itself said once: "I'm using my phone I'm
    using my phone I'm using my phone" -> "I'm using my phone" (the recording's words, not the model's)."""
    def once(m: re.Match) -> str:  # the first saying, with its own mark unless one follows the last
        mark = m[2].strip()[:1]
        follows = m.end() < len(line) and not line[m.end()].isspace() and not line[m.end()].isalnum()
        return m[1] + ("" if follows else mark)

    return _RERUN_CJK.sub(r"\1", _RERUN.sub(once, line))


def cite_line(u: Unit, q: Query, label: Callable[[int], str]) -> str:
    """"Alice's view, DAY1 11:16: I keep tightening screws" — the unit's line closest to the question."""
    wanted = set(query_tokens(" ".join((q.question, *q.options))))
    line = unrepeated(" / ".join(best_lines(u, wanted, 1)))
    line = line if len(line) <= 160 else line[:157] + "..."
    line = line.rstrip(" .;。") if not line.endswith("...") else line
    return f"{view_of(u.agent)}, {label(u.start_ms)[:-3]}: {line}"


def extractive(units: list[Unit], q: Query, label: Callable[[int], str], *, found: bool = True, most: int = 2) -> str:
    """An answer made only of the evidence: who, when and the lines; to a question about what was
    said, the lines of speech that match it as who said them and when (`assistant.talk`)."""
    if found and talk.asks_talk(q.question):
        names = {t for u in units for t in query_tokens(person_name(u.agent))}
        speech = talk.reported(units, q, label, names | GENERIC | _TIME_TOKENS)
        if speech:
            return speech
    shown = [cite_line(u, q, label) for u in units[:most]]
    if not found:
        return NOT_FOUND + (" The closest: " + "; ".join(shown) + "." if shown else "")
    return "From the memory: " + "; ".join(shown) + "." if shown else NOT_FOUND


def check_open(raw: str, q: Query, units: list[Unit], cites: list[int], prompt: str,
               label: Callable[[int], str], sentences: int = 1) -> Reply:
    """The open answer as shown: the model's first clean `sentences` when they hold up (the second alone
    when the first says nothing of its own); else the evidence itself (`extractive`), or "I don't find
    this in the memory" with the closest evidence."""
    text = without_echoes(clean(raw), prompt)
    cited = [units[i - 1] for i in cites] or units
    cited_first = [*cited, *(u for u in units if u not in cited)]  # lines said; the time of a timeless answer
    if says_nothing(text):
        return Reply(extractive(units, q, label, found=False), None, cites, NOT_FOUND_MODE, "says nothing", raw=raw)
    why = degenerate(raw, prompt)
    if why:
        return Reply(extractive(cited_first, q, label), None, cites, EXTRACTIVE, why, raw=raw)
    first, *rest = _SENTENCE.split(without_asides(text, q, units))
    shown, rest = " ".join([first, *rest][:sentences]), rest[:sentences]
    names = set() if question_word(q.question) == "who" else {t for u in units for t in query_tokens(person_name(u.agent))}
    ignore = names | GENERIC | _TIME_TOKENS  # what a first sentence may hold and still say nothing
    restated = talk.brings_nothing(first, q, ignore)  # "Jake was talking about lunch on DAY1."
    if restated and rest and not talk.asks_talk(q.question) and not talk.brings_nothing(" ".join(rest), q, ignore):
        shown, restated = " ".join(rest), False
    # what is shown must hold the evidence, not the sentences cut away (a restatement: the whole reply)
    from_evidence, on_topic = grounded(text if restated else shown, q, units)
    if not from_evidence and on_topic:
        return Reply(extractive(cited, q, label), None, cites, EXTRACTIVE, "nothing from the evidence", raw=raw)
    if not from_evidence:
        return Reply(extractive(units, q, label, found=False), None, cites, NOT_FOUND_MODE, "not in the evidence",
                     raw=raw)
    if restated:
        return Reply(extractive(cited_first, q, label), None, cites, EXTRACTIVE, "restates the question", raw=raw)
    told = addressed(reported(shown, [*cited, *units], label), q)
    completed = with_source(told, cited, q, label)
    if completed != told or not (u := seen_at(told, q, cited_first)):  # a terse one has its source already
        return Reply(completed, None, cites)
    where = units.index(u) + 1  # the excerpt the time is from is among the evidence shown
    return Reply(at_time(told, u, label), None, cites if where in cites else [*cites, where])


def reported(text: str, units: list[Unit], label: Callable[[int], str]) -> str:
    """A reply that only copies a line of speech ("Jake: We can or we can't.") told as a sentence
    of who said it and when, from the first excerpt that holds the line, in its recorded words: 'At
    11:53 on DAY1, Jake said: "We can or we can't. How many people in total?"'; any other reply as it is."""
    m = _QUOTED.match(text)
    if not m or not tokens(m.group(2)):
        return text
    who, said = m.group(1), m.group(2).strip()
    key = " ".join(tokens(said)[:8])
    for u in units:
        for speaker, words in map(talk.said_by, unit_lines(u)):
            if speaker == who and key in " ".join(tokens(words)):
                day, _, hms = label(u.start_ms).partition(" ")
                whole = unrepeated(words)
                parts = _SENTENCE.split(whole)  # as recorded, when the reply stopped at one of its sentences' ends
                cut = any(tokens(" ".join(parts[:k])) == tokens(said) for k in range(1, len(parts)))
                whole = whole if cut and len(whole) <= 200 else said
                return f'At {hms[:5]} on {day}, {who} said: "{whole}"'
    return f'{who} said: "{said}"'


def with_source(text: str, cited: list[Unit], q: Query, label: Callable[[int], str], terse: int = 6) -> str:
    """A terse answer that names no time ("Jake", "Katrina wanted pizza": `terse` words or fewer, no
    digit) completed with who saw it and when, from the first cited excerpt: "Jake (Alice's view,
    DAY1 11:16: ...)."; any other as it is."""
    if len(tokens(text)) > terse or re.search(r"\d", text) or not cited:
        return text
    return f"{text.rstrip(' .。')} ({cite_line(cited[0], q, label)})."


def at_time(text: str, u: Unit, label: Callable[[int], str]) -> str:
    """The answer told with the excerpt's time: "... in the supermarket (around 18:07 on DAY1)."
    (a "?", "!", closing quote or "..." of the model's own stays where it is)."""
    day, _, hms = label(u.start_ms).partition(" ")
    end = "" if text.endswith(("?", "!", '"', "”", "...")) else "."
    return f"{text if not end else text.rstrip(' .。')} (around {hms[:5]} on {day}){end}"


def seen_at(text: str, q: Query, seen: list[Unit]) -> Unit | None:
    """The excerpt whose time a longer English answer that names none is told with ("Tasha bought
    the egg tart crusts in the supermarket (around 18:07 on DAY1)."): the first of `seen` (the cited
    ones first) holding most of its content words, people's names aside. None for an answer that
    says when, in Chinese, about a habit (no one time), ending in a line of speech, copying a line no
    excerpt holds, or sharing no content word with any excerpt."""
    last = _SENTENCE.split(text)[-1]
    if (re.search(r"\d", text) or _SAYS_WHEN.search(text) or _UNHELD.match(text) or _QUOTED.match(last)
            or has_cjk(text) or _HABIT.search(f"{q.question} {text}")):
        return None
    people = {person_name(u.agent) for u in seen} | {who for u in seen for x in unit_lines(u) if (who := speaker_of(x))}
    said = set(query_tokens(text)) - GENERIC - set(query_tokens(" ".join(people)))
    shared = [len(said & set(query_tokens(u.text))) for u in seen]
    best = max(range(len(seen)), key=shared.__getitem__, default=None)
    return seen[best] if best is not None and shared[best] else None
