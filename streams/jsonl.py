"""Reader of the generic JSON-lines recording: one observation a line.

    {"agent": "robot1", "kind": "caption", "start": "DAY1 11:09:43.5", "end": "DAY1 11:09:44",
     "text": "I pick up the charger", "speaker": null, "lang": "en", "id": "r1-000001"}

`start`/`end` are epoch milliseconds or any time the house clock reads ("DAY3 11:21:02",
ISO 8601); `end`, `speaker`, `lang` and `id` are optional (without an id, the content is the key).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import ValidationError

from streams.errors import RecordingError
from streams.messages import AgentCaption, CaptionMessage, first_error

# user-given time (str or number) -> epoch ms
TimeReader = Callable[[str | int | float], int]


def read_jsonl(path: Path, parse_time: TimeReader) -> Iterator[tuple[int, AgentCaption | RecordingError]]:
    """(line number, caption or the error of that line); a bad line does not stop the file."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise RecordingError("a line must be a JSON object", where=where)
                unknown = set(row) - {"agent", "kind", "start", "end", "text", "speaker", "lang", "id"}
                if unknown:
                    raise RecordingError(f"unknown field(s) {sorted(unknown)}", where=where)
                for need in ("agent", "start", "text"):
                    if row.get(need) in (None, ""):
                        raise RecordingError(f"missing {need}", where=where)
                start = parse_time(row["start"])
                end = parse_time(row["end"]) if row.get("end") not in (None, "") else None
                text = str(row["text"])
                msg = CaptionMessage(
                    id=str(row.get("id") or f"auto:{start}:{hash_text(text)}"),
                    ts=start, end_ts=end, kind=row.get("kind") or "caption", text=text,
                    speaker=row.get("speaker"), lang=row.get("lang"),
                )
                yield n, AgentCaption(agent=str(row["agent"]), msg=msg)
            except RecordingError as e:
                yield n, e
            except ValidationError as e:
                yield n, RecordingError(first_error(e), where=where)
            except ValueError as e:  # bad JSON or unreadable time
                yield n, RecordingError(str(e), where=where)


def hash_text(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode()).hexdigest()[:16]
