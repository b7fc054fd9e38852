"""How units of context read to the answering model, and what they cost in tokens.

Every excerpt is headed by whose view it is ("[3] Alice's view, DAY1 11:16:00-11:16:30"), so a
first-person line in it ("I keep tightening screws", "我依旧在拧螺丝") reads as that person's. Where
a moment is written in two languages (a bilingual transcript, A1_JAKE's translated captions) only
the English line is shown: the models read English best and the line costs half the tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from assistant.query import Query, person_name
from memory.records import Unit
from memory.tokenize import query_tokens

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_SPEAKER = re.compile(r"^([^:：]{1,40})[:：]\s")


def view_of(agent: str) -> str:
    """'A2_ALICE' -> "Alice's view"."""
    return f"{person_name(agent)}'s view"


def is_cjk(line: str) -> bool:
    letters = sum(c.isalpha() for c in line)
    return bool(letters) and len(_CJK.findall(line)) > letters * 0.2


def speaker_of(line: str) -> str | None:
    m = _SPEAKER.match(line)
    return m.group(1).strip() if m else None


def twin_of(lines: list[str], i: int) -> int | None:
    """The index of the English twin standing next to a Chinese line (same speaker; the next line
    first, as transcripts give a line and then its translation); None for any other line."""
    if not is_cjk(lines[i]):
        return None
    near = [j for j in (i + 1, i - 1) if 0 <= j < len(lines)]
    return next((j for j in near if not is_cjk(lines[j]) and speaker_of(lines[j]) == speaker_of(lines[i])), None)


def english_first(lines: list[str]) -> list[str]:
    """The lines without a Chinese line whose English twin stands next to it (same speaker)."""
    return [line for i, line in enumerate(lines) if twin_of(lines, i) is None]


_I_ZH = re.compile(r"我(?!们)")
_I_EN = {"I'm": "{n} is", "I've": "{n} has", "I'll": "{n} will", "I'd": "{n} would", "I": "{n}", "me": "{n}",
         "my": "{n}'s", "My": "{n}'s", "mine": "{n}'s", "myself": "{n}"}
_I_EN_WORD = re.compile(r"\b(I'm|I've|I'll|I'd|I|me|my|My|mine|myself)\b")


_VERB_AFTER_I = re.compile(r"\bI((?: (?:also|still|then|just|again|now|first|slowly|quickly|carefully|gently|"
                           r"immediately|finally))?) ([a-z]+)\b")
_THIRD = {"am": "is", "have": "has", "do": "does", "go": "goes"}
# irregular pasts and their present: "I took it" is named "Alice took it" (not "takes"), and a reply's
# "drew" is read as the question's "draw" (`talk.brings_nothing`)
PAST_OF = dict(pair.split(":") for pair in """ate:eat became:become began:begin bought:buy broke:break
    brought:bring built:build came:come caught:catch chose:choose drank:drink drew:draw drove:drive fed:feed
    fell:fall felt:feel flew:fly forgot:forget found:find gave:give got:get heard:hear held:hold hung:hang kept:keep
    knew:know lay:lie led:lead left:leave lent:lend lost:lose made:make meant:mean met:meet paid:pay ran:run
    rode:ride rose:rise said:say sang:sing sat:sit saw:see sent:send shook:shake showed:show slept:sleep sold:sell
    spent:spend spoke:speak stood:stand stuck:stick swam:swim swept:sweep taught:teach thought:think threw:throw
    told:tell took:take tore:tear understood:understand went:go woke:wake won:win wore:wear wrote:write""".split())
_AS_IS = {"can", "could", "will", "would", "shall", "should", "may", "might", "must", "did", "had", "was",
          # past forms that read the same in the present ("I put" is kept), and those without -ed
          "put", "set", "cut", "hit", "let", "read", "shut", *PAST_OF}


def _third_person(verb: str) -> str:
    """The verb after "I", for the wearer: "turn" -> "turns", "watch" -> "watches", "try" -> "tries";
    a past form, a modal or an -ing form as it is."""
    if verb in _THIRD:
        return _THIRD[verb]
    if verb in _AS_IS or verb.endswith(("ed", "ing")) or len(verb) < 2:
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def named(line: str, name: str) -> str:
    """A line of the wearer's own view (not speech) with "I" written as the wearer, the verb agreeing:
    我依旧在拧螺丝 -> Alice依旧在拧螺丝, "I pick it up" -> "Alice picks it up", "where I am" -> "where
    Alice is" (a small model does not carry the excerpt's heading down to its lines, and copies
    "Alice pick" as "she pick")."""
    if speaker_of(line):
        return line
    if is_cjk(line):
        return _I_ZH.sub(name, line)
    line = _VERB_AFTER_I.sub(lambda m: f"I{m.group(1)} {_third_person(m.group(2))}", line)
    return _I_EN_WORD.sub(lambda m: _I_EN[m.group(1)].format(n=name), line)


def unit_lines(u: Unit) -> list[str]:
    return english_first([x for x in u.text.split("\n") if x.strip()])


def best_lines(u: Unit, wanted: set[str], n: int = 1, forms: Mapping[str, set[str]] | None = None) -> list[str]:
    """The unit's `n` lines that hold most of the `wanted` words, each in any of its `forms` (its
    translations: a word counts once however many it has), in their own order (ties: the English
    line, then the earlier); an English line holds the words of the Chinese twin it stands for too
    ("Haidilao partnered with Chibi Maruko" holds 樱桃 of 樱桃小丸子)."""
    raw = [x for x in u.text.split("\n") if x.strip()]
    words, twins = [set(query_tokens(x)) for x in raw], [twin_of(raw, i) for i in range(len(raw))]
    for i, j in enumerate(twins):
        if j is not None:
            words[j] |= words[i]
    shown = [i for i, j in enumerate(twins) if j is None]
    ways = [{t} | set((forms or {}).get(t, ())) for t in wanted]
    ranked = sorted(shown, key=lambda i: (-sum(bool(w & words[i]) for w in ways), is_cjk(raw[i]), i))
    return [raw[i] for i in sorted(ranked[:n])]


def bearing_lines(u: Unit, answer: str, question: str, n: int = 2) -> list[str]:
    """The unit's `n` lines that bear out `answer` best, as a person reads them beside it: the
    wearer's own lines with "I" written as the wearer (`named`), an answer's words counting twice a
    question's, the English twin of a line said in two languages, ties to the earlier. None shares
    a word: the unit's first line."""
    lines = [named(x, person_name(u.agent)) for x in unit_lines(u)]
    if not lines:
        return []
    said, asked = set(query_tokens(answer)), set(query_tokens(question))

    def weight(line: str) -> int:
        words = set(query_tokens(line))
        return 2 * len(said & words) + len(asked & words)

    ranked = sorted(range(len(lines)), key=lambda i: (-weight(lines[i]), is_cjk(lines[i]), i))
    kept = [i for i in ranked[:n] if weight(lines[i]) > 0]
    return [lines[i] for i in sorted(kept)] or lines[:1]


def fit_events(events: list, budget: int, cost: Callable[[object], int]) -> list:
    """The best events (best first) whose lines fit `budget` tokens, `cost(event)` each and a
    newline between them: the excerpts keep the rest of the context."""
    kept, used = [], 0
    for e in events:
        used += cost(e) + 1
        if used > budget:
            break
        kept.append(e)
    return kept


def fit_units(units: list[Unit], q: Query, budget: int, count: Callable[[str], int],
              label: Callable[[int], str], filler: int | None = None, once: bool = False,
              decay: float = 0.5, first_person: bool = True, also: set[str] | frozenset = frozenset(),
              in_time_order: bool = False) -> tuple[list[Unit], str]:
    """Units numbered for citation by rank, each cut to its share of the token budget
    (`shown_lines`); with `in_time_order` the excerpts are written earliest first, each keeping its
    number."""
    if not units:
        return [], "(none found)"
    shown = shown_lines(units, q, budget, count, label, filler, once, decay, also)
    blocks = [(u.start_ms, n, head + "\n" + "\n".join(named(x, person_name(u.agent)) if first_person else x
                                                      for x in lines))
              for n, (u, (head, lines)) in enumerate(zip(units, shown, strict=True))]
    if in_time_order:
        blocks.sort()
    return list(units), "\n\n".join(b for *_, b in blocks)


def shown_lines(units: list[Unit], q: Query, budget: int, count: Callable[[str], int],
                label: Callable[[int], str], filler: int | None = None,
                once: bool = False, decay: float = 0.5,
                also: set[str] | frozenset = frozenset()) -> list[tuple[str, list[str]]]:
    """(heading, the lines shown) of each unit, in its share of the token budget.

    Within a unit the lines that share words with the question (and its sub-queries) are kept
    first, in their own order. With `filler`, at most that many lines that share no word are
    kept besides (those next to a kept line first, at least one a unit): the rest costs tokens
    and tells the model nothing the question asks about. The excerpt ranked n-th gets a share
    proportional to 1/n^`decay` of what is left (0: equal shares), so tokens an excerpt leaves
    unused go to those after it. `also`: more words that count as the question's (the
    translations the memory's glossary is sure of: 丝刀 for "screwdriver" keeps Alice's
    用螺丝刀戳破了, a line never translated).
    """
    wanted = set(query_tokens(" ".join((q.question, *q.options)))) | set(also)
    for u in units:
        wanted |= set(query_tokens(u.extra.get("query", "")))
    weights = [1 / (n ** decay) for n in range(1, len(units) + 1)]
    out, said, left = [], set(), budget
    for n, u in enumerate(units, 1):
        # a better-ranked excerpt gets a larger share; what one leaves unused goes to those after it
        share = max(40, int(left * weights[n - 1] / sum(weights[n - 1:])))
        head = f"[{n}] {view_of(u.agent)}, {label(u.start_ms)}-{label(u.end_ms)[-8:]}"
        lines = unit_lines(u)
        if once:  # words several wearers heard are shown in the first (best) excerpt that has them
            lines = [x for x in lines if not (speaker_of(x) and (u.start_ms, x) in said)] or lines[:1]
        overlap = [len(wanted & set(query_tokens(x))) for x in lines]
        ranked = sorted(range(len(lines)), key=lambda i: -overlap[i])
        if filler is not None:
            ranked = _with_filler(ranked, overlap, filler)
        chosen, used = set(), count(head)
        for i in ranked:
            c = count(lines[i]) + 1
            if used + c > share:
                continue
            chosen.add(i)
            used += c
        out.append((head, [lines[i] for i in sorted(chosen)]))
        left = max(0, left - used)
        said |= {(u.start_ms, lines[i]) for i in chosen}
    return out


def _with_filler(ranked: list[int], overlap: list[int], filler: int) -> list[int]:
    """The matching lines, then at most `filler` others (at least one when none match), those
    next to a matching line first."""
    hits = [i for i in ranked if overlap[i] > 0]
    near = {j for i in hits for j in (i - 1, i + 1)}
    rest = sorted((i for i in ranked if overlap[i] == 0), key=lambda i: (i not in near, i))
    return hits + rest[: max(filler, 0 if hits else 1)]


def supporting(units: list[Unit], option: str, question: str = "", also: set[str] | frozenset = frozenset(),
               most: int = 3) -> list[int]:
    """The numbers (from 1) of the units that bear out the chosen option, best first: those sharing
    words with both the option and the question first (the wearer's name counts half a word:
    "Alice" finds Alice's own view; `also` counts as the question's: its sure translations, so
    Alice's 用螺丝刀 bears out "Alice used the screwdriver"), then by the words shared; none when no
    unit shares a word with either."""
    said, asked = set(query_tokens(option)), set(query_tokens(question)) | set(also)
    ranked = []
    for i, u in enumerate(units):
        words, wearer = set(query_tokens(u.text)), set(query_tokens(person_name(u.agent)))
        o, a = len(said & words) + 0.5 * len(said & wearer - words), len(asked & words)
        ranked.append((o > 0 and a > 0, o + a, o, -i))
    return [1 - i for _, shared, _, i in sorted(ranked, reverse=True)[:most] if shared > 0]
