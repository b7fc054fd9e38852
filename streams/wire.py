"""Checks shared by every handler of the wire: JSON parsed once and safely, plausible times, ids
for error reports, and drop counters that report the 1st, 10th, 100th and every 1000th drop."""

from __future__ import annotations

import hashlib

from pydantic_core import from_json

from streams.errors import EncodingError, SchemaViolation

EPOCH_2000_MS = 946_684_800_000
FUTURE_SLACK_MS = 86_400_000
I64 = 2**63 - 1  # SQLite's integers: a bigger number would fail where it is stored, not where it came in


def parse_json(data: bytes | str, *, where: str | None = None):
    """The JSON value of a payload, parsed once. Deep nesting, lone surrogates, numbers beyond any
    width and malformed text all become a coded StreamError, never RecursionError or OverflowError."""
    if isinstance(data, bytes | bytearray):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise EncodingError(f"payload is not UTF-8 (byte {e.start})", where=where) from None
    try:
        return from_json(data)  # pydantic-core's parser: bounded recursion, no float('nan') surprises
    except (ValueError, RecursionError, MemoryError) as e:
        raise SchemaViolation(f"not JSON: {str(e)[:120]}", where=where) from None


def id_in(value) -> str | None:
    """The `id` of a parsed message, for error reports: a string of at most 128 characters."""
    if isinstance(value, dict) and isinstance(value.get("id"), str | int) and not isinstance(value.get("id"), bool):
        return str(value["id"])[:128]
    return None


def plausible_ms(ts: int, now_ms: int) -> bool:
    """An epoch-ms capture time between 2000 and a day ahead of now."""
    return EPOCH_2000_MS <= ts <= now_ms + FUTURE_SLACK_MS


def message_key(topic: str, payload: bytes) -> str:
    """A short key for one message (topic and bytes), to recognise it when the broker sends it again."""
    return hashlib.blake2b(topic.encode("utf-8", "replace") + b"\0" + payload, digest_size=10).hexdigest()


class Drops:
    """Counts what a bounded queue turned away; `note()` says when to report it."""

    def __init__(self) -> None:
        self.n = 0

    def note(self) -> bool:
        self.n += 1
        return self.n in (1, 10, 100) or self.n % 1000 == 0
