"""EgoLifeQA items: questions with their query time and the target times of their evidence.

Quirks handled: `time_list` instead of `time`; several times packed into one string
("11153417DAY1_11181201", "13444813DAY3_20222516"); dates written "Day1". A packed string is
read as a list of time points (not a range), which is the stricter reading for Hit@W.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from memory.clock import HouseClock
from memory.errors import TimeFormatError

_PACKED = re.compile(r"(?:(day\s*\d+)_)?(\d{8})", re.I)


@dataclass(frozen=True)
class QAItem:
    id: str
    type: str
    question: str
    options: tuple[str, ...]
    answer: str
    query_ms: int
    targets: tuple[int, ...]
    source: str


def parse_times(date: str, value: str | list, clock: HouseClock) -> list[int]:
    """All time points of a `time` or `time_list` value, on the date unless a part names its own."""
    values = value if isinstance(value, list) else [value]
    out: list[int] = []
    for v in values:
        parts = _PACKED.findall(str(v))
        if not parts:
            raise TimeFormatError(f"no HHMMSSFF time in {v!r}")
        out.extend(clock.egolife(d or date, t) for d, t in parts)
    return out


def load_items(paths: list[Path], clock: HouseClock) -> list[QAItem]:
    items: list[QAItem] = []
    for path in paths:
        for raw in json.loads(Path(path).read_text(encoding="utf-8")):
            tt = raw["target_time"]
            targets = parse_times(tt["date"], tt.get("time_list", tt.get("time")), clock)
            q = raw["query_time"]
            items.append(
                QAItem(
                    id=f"{Path(path).stem}#{raw['ID']}",
                    type=raw.get("type", "unknown"),
                    question=raw["question"],
                    options=tuple(raw.get(f"choice_{c}", "") for c in "abcd"),
                    answer=raw.get("answer", ""),
                    query_ms=clock.egolife(q["date"], q["time"]),
                    targets=tuple(targets),
                    source=str(path),
                )
            )
    return items
