"""House time: UTC epoch milliseconds inside, the house's local time outside.

`house.day1` maps the EgoLife-style "DAY n HH:MM:SS" to absolute time and back, so a question
may say "on DAY3" and a caption file named ``..._DAY3_11000000.srt`` lands on the right date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from memory.errors import TimeFormatError

DAY_MS = 86_400_000
_DAY_CLOCK = re.compile(
    r"^\s*day\s*_?(\d+)(?:[\s_T]+(\d{1,2}):?(\d{2})(?::?(\d{2}))?(?:[.,:]?(\d{1,3}))?)?\s*$", re.I
)
_HHMMSSFF = re.compile(r"^(\d{2})(\d{2})(\d{2})(\d{2})?$")


@dataclass(frozen=True)
class HouseClock:
    """Converts between epoch ms and the house's calendar ("DAY n", local wall time)."""

    day1: date
    tz: ZoneInfo

    @classmethod
    def of(cls, day1: date | str, tz: str = "UTC") -> HouseClock:
        d = date.fromisoformat(day1) if isinstance(day1, str) else day1
        return cls(d, ZoneInfo(tz))

    def at(self, day: int, seconds: float) -> int:
        """Epoch ms of DAY `day` (1-based) at `seconds` after local midnight."""
        midnight = datetime.combine(self.day1 + timedelta(days=day - 1), time(), self.tz)
        return round(midnight.timestamp() * 1000 + seconds * 1000)

    def day_of(self, ms: int) -> tuple[int, float]:
        """(DAY n, seconds after local midnight) of an epoch ms."""
        local = self.local(ms)
        day = (local.date() - self.day1).days + 1
        secs = local.hour * 3600 + local.minute * 60 + local.second + local.microsecond / 1e6
        return day, secs

    def local(self, ms: int) -> datetime:
        return datetime.fromtimestamp(ms / 1000, UTC).astimezone(self.tz)

    def iso(self, ms: int) -> str:
        """Local ISO 8601 with offset, milliseconds kept when not zero."""
        spec = "milliseconds" if ms % 1000 else "seconds"
        return self.local(ms).isoformat(timespec=spec)

    def label(self, ms: int) -> str:
        """'DAY3 11:21:02' — the house calendar a supervisor speaks."""
        day, secs = self.day_of(ms)
        s = int(secs)
        return f"DAY{day} {s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"

    def egolife(self, day: str, hhmmssff: str) -> int:
        """EgoLifeQA time: date 'DAY1' or 'Day1', time 'HHMMSSFF' (FF = hundredths)."""
        m = re.fullmatch(r"\s*day\s*(\d+)\s*", day, re.I)
        t = _HHMMSSFF.match(hhmmssff.strip())
        if not m or not t:
            raise TimeFormatError(f"not an EgoLife time: date={day!r} time={hhmmssff!r}")
        hh, mm, ss, ff = (int(g or 0) for g in t.groups())
        return self.at(int(m.group(1)), hh * 3600 + mm * 60 + ss + ff / 100)

    def parse(self, text: str | int | float, now_ms: int | None = None) -> int:
        """Parse a user-given time: epoch ms, 'now', 'DAY3 11:21:02', 'DAY3_11210217', ISO 8601.

        An ISO time without an offset is house-local time.
        """
        if isinstance(text, int | float):
            return int(text)
        s = text.strip()
        if s.lower() == "now":
            return now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
        if re.fullmatch(r"\d{11,14}", s):
            return int(s)
        packed = re.fullmatch(r"(day\s*_?\d+)_(\d{6,8})", s, re.I)
        if packed:
            return self.egolife(packed.group(1).replace("_", ""), packed.group(2))
        m = _DAY_CLOCK.match(s)
        if m:
            day, hh, mm, ss, frac = m.groups()
            secs = int(hh or 0) * 3600 + int(mm or 0) * 60 + int(ss or 0)
            secs += float(f"0.{frac}") if frac else 0.0
            return self.at(int(day), secs)
        try:
            dt = datetime.fromisoformat(s)
        except ValueError:
            raise TimeFormatError(
                f"unreadable time {text!r}: use 'DAY3 11:21:02', ISO 8601 or epoch milliseconds"
            ) from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=self.tz)
        return round(dt.timestamp() * 1000)
