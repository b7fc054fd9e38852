"""An answer to a question about the asker, told to them: "What am I doing near the camera?" is
answered "You are adjusting your action camera", not "Jake is adjusting Jake's action camera".

The model's first person ("I took out the vegetables") and the asker's own name (the memory's
excerpts name each wearer's "I") become "you", "your"; a verb after the name as subject agrees
with "you" ("Jake buys" -> "you buy", "Jake was" -> "you were"). Quoted words, a source in
parentheses and speech after "Name:" (to the end of the text when the cut to a first sentence
left them open) stay as recorded."""

from __future__ import annotations

import re
from functools import lru_cache

from assistant.query import Query, person_name, speaks_of_self

_ASIDE = r'(?P<aside>\([^)]*\)?|"[^"]*"?|“[^”]*”?|‘[^’]*’?|「[^」]*」?|\b[A-Z][\w-]*:\s.*)'
# "I" as a word of its own (not "I.D.", "I-beam")
_FIRST = re.compile(_ASIDE + r"|(?<![\w'’.-])(?:I am|I was|I wasn['’]t|I['’](?:m|ve|d|ll)|I|[Mm]e|[Mm]y|[Mm]ine|"
                    r"[Mm]yself)(?![\w'’-]|\.\w)", re.S)
_SECOND = {"i am": "you are", "i was": "you were", "i wasn't": "you weren't", "i'm": "you're", "i've": "you've",
           "i'd": "you'd", "i'll": "you'll", "i": "you", "me": "you", "my": "your", "mine": "yours",
           "myself": "yourself"}
# where a name is the subject of what follows: the text's or a clause's start (after "Tasha says")
_CLAUSE = re.compile(r"(?:^|[.!?,;:)]|\b(?:and|but|while|when|then|that|because|so|as|after|before|says|said|"
                     r"thinks|thought|knows|knew|sees|saw|noticed|heard|feels|felt|believes))\s*$", re.I)
_ADVERB = r"(?:[a-z]+ly|always|often|also|still|just|then|now|never|first|again|already|sometimes|perhaps|" \
          r"afterwards|alone|together|later|soon)\s+"
# a name the answer goes on to call "he" or "she" ("Jake is adjusting his camera"), with two verbs joined by
# "and" ("Jake picks it up and adjusts it"), or as "Jake's" for "Jake is" / "Jake has": left as it is,
# which reads right, where "you" could not be told how to agree
_UNSURE = re.compile(r"\b(?:he|him|his|himself|she|her|hers|herself)\b|\band\s+[a-z]+s\b|"
                     r"['’]s\s+(?:[a-z]+ing|been|here|there|not|gone|got)\b", re.I)
_AGREE = {"is": "are", "was": "were", "has": "have", "does": "do", "goes": "go", "isn't": "aren't",
          "wasn't": "weren't", "hasn't": "haven't", "doesn't": "don't", "himself": "yourself", "herself": "yourself"}


def addressed(text: str, q: Query) -> str:
    """The answer told to the asker when the question is about them ("I", "my", "we" in it); any
    other answer as it is."""
    if not q.asker or not speaks_of_self(q.question):
        return text
    text = _FIRST.sub(lambda m: m[0] if m["aside"] else _cased(_SECOND[m[0].lower().replace("’", "'")], text,
                                                                  m.start()), text)
    name = _named(person_name(q.asker))
    first = next((m for m in name.finditer(text) if not m["aside"]), None)
    if first is None or _UNSURE.search(re.sub(_ASIDE, " ", text[first.start():], flags=re.S)):
        return text
    return name.sub(lambda m: _you(m, text), text)


@lru_cache(maxsize=16)
def _named(name: str) -> re.Pattern:
    return re.compile(_ASIDE + rf"|(?<![\w'’.-]){re.escape(name)}(?:(?P<own>['’]s)|(?P<gap>\s+(?:{_ADVERB})?)"
                      r"(?P<verb>[a-z]+(?:n['’]t)?)\b)?(?![\w'’-])", re.S)


def _you(m: re.Match, text: str) -> str:
    if m["aside"]:
        return m[0]
    if m["own"]:  # "The phone is Jake's." -> "yours"
        return _cased("yours" if re.match(r"\s*(?:[.,;!?]|$)", text[m.end():]) else "your", text, m.start())
    verb = m["verb"]  # "is", "was", "has" after the name always go with it; "buys" only as a clause's subject
    said = "you" if verb is None else f"you{m['gap']}" + (
        _agreed(verb) if verb.replace("’", "'") in _AGREE or _CLAUSE.search(text[:m.start()]) else verb)
    return _cased(said, text, m.start())


def _agreed(verb: str) -> str:
    """A verb of "he"/"she" as it goes with "you": buys -> buy, washes -> wash, carries -> carry."""
    verb = verb.replace("’", "'")
    if verb in _AGREE:
        return _AGREE[verb]
    if len(verb) > 4 and verb.endswith("ies"):
        return verb[:-3] + "y"
    if re.search(r"(?:ss|sh|ch|x|z|o)es$", verb):
        return verb[:-2]
    return verb[:-1] if len(verb) > 3 and verb.endswith("s") and not verb.endswith(("ss", "us", "is")) else verb


def _cased(word: str, text: str, at: int) -> str:
    head = text[:at].rstrip()
    opens = not head or head[-1] in ".!?" or re.fullmatch(r"\([^)]*\)", head)  # after a source that opens it
    return word[:1].upper() + word[1:] if opens else word
