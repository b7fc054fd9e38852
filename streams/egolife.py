"""Reader of the EgoLifeCap layout: dense captions, bilingual transcripts, translated captions.

File names are irregular (``A4_LUCIA_DAY6_14000000.mp4.srt``, ``DAY6_A4_LUCIA_21000000.mp4.srt``),
so the day comes from the folder and the hour from the last 8-digit group of the name. SRT times
are offsets inside that hour. Both languages are kept: a transcript entry yields one caption per
language line, A1_JAKE's translated JSONL an English twin of each Chinese caption.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from streams.errors import RecordingError
from streams.messages import AgentCaption, CaptionMessage

# (day, seconds after local midnight) -> epoch ms
DayClock = Callable[[int, float], int]

_TIME = re.compile(r"(\d+):(\d{2}):(\d{2})[,.](\d{1,3})")
_HOUR = re.compile(r"(\d{2})0000(?:\d{2})?(?=\D*$)")
_DAY = re.compile(r"^DAY(\d+)$", re.I)
_SPEAKER = re.compile(r"^\s*([^:：]{1,40}?)\s*[:：]\s*(.*)$")
_CJK = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True)
class SrtEntry:
    index: int
    start_s: float
    end_s: float
    lines: tuple[str, ...]


@dataclass(frozen=True)
class HourFile:
    """One recorded hour of one agent: which stream, whose, which day and hour."""

    path: Path
    stream: str  # caption | transcript | translated
    agent: str
    day: int
    hour: int


def _secs(stamp: str) -> float:
    m = _TIME.fullmatch(stamp.strip())
    if not m:
        raise ValueError(f"bad SRT time {stamp!r}")
    h, mi, s, frac = m.groups()
    return int(h) * 3600 + int(mi) * 60 + int(s) + int(frac.ljust(3, "0")) / 1000


def parse_srt(text: str, *, where: str = "") -> Iterator[SrtEntry]:
    """SRT blocks; a block whose header is unreadable is skipped, not fatal."""
    for block in re.split(r"\r?\n\s*\r?\n", text.lstrip("\ufeff")):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if len(lines) < 2 or "-->" not in lines[1]:
            continue
        try:
            start, end = (_secs(p) for p in lines[1].split("-->"))
            index = int(lines[0].strip())
        except ValueError:
            continue
        body = tuple(ln.strip() for ln in lines[2:])
        if body:
            yield SrtEntry(index, start, max(start, end), body)


def hour_of(path: Path) -> int:
    m = _HOUR.search(path.name.split(".")[0]) or _HOUR.search(path.name)
    if not m:
        raise RecordingError("no HH000000 hour in file name", where=str(path))
    return int(m.group(1))


def discover(root: Path, days: set[int] | None = None, agents: set[str] | None = None) -> list[HourFile]:
    """Every hour file under an EgoLifeCap folder, in (day, hour, agent, stream) order."""
    root = Path(root)
    if not (root / "DenseCaption").is_dir() and not (root / "Transcript").is_dir():
        raise RecordingError("not an EgoLifeCap folder (no DenseCaption/ or Transcript/)", where=str(root))
    found: list[HourFile] = []
    for stream, sub in (("caption", "DenseCaption"), ("transcript", "Transcript")):
        for path in sorted((root / sub).glob("*/*/*.srt")):
            agent, day_dir = path.parent.parent.name, path.parent.name
            m = _DAY.match(day_dir)
            if not m or agent == "translated":
                continue
            found.append(HourFile(path, stream, agent, int(m.group(1)), hour_of(path)))
    for path in sorted((root / "DenseCaption" / "translated").glob("*.jsonl")):
        m = re.match(r"^(.+?)_DAY(\d+)_", path.name, re.I)
        if m:
            found.append(HourFile(path, "translated", m.group(1), int(m.group(2)), hour_of(path)))
    found = [
        f for f in found if (days is None or f.day in days) and (agents is None or f.agent in agents)
    ]
    order = {"caption": 0, "translated": 1, "transcript": 2}
    return sorted(found, key=lambda f: (f.day, f.hour, f.agent, order[f.stream]))


def read_hour(f: HourFile, at: DayClock) -> list[AgentCaption]:
    """The captions of one hour file, timed on the house clock."""
    base = f.hour * 3600
    tag = f"D{f.day}H{f.hour:02d}"
    try:
        text = f.path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise RecordingError(str(e), where=str(f.path)) from None
    out: list[AgentCaption] = []

    def emit(id_: str, start_s: float, end_s: float, kind: str, body: str, speaker=None, lang=None):
        if body.strip():
            msg = CaptionMessage(
                id=id_, ts=at(f.day, base + start_s), end_ts=at(f.day, base + end_s),
                kind=kind, text=body.strip(), speaker=speaker, lang=lang,
            )
            out.append(AgentCaption(agent=f.agent, msg=msg))

    if f.stream == "translated":
        twin_path = _twin_srt(f)
        srt = {e.index: e for e in parse_srt(twin_path.read_text("utf-8", "replace"))} if twin_path.exists() else {}
        for line in text.splitlines():
            try:
                row = json.loads(line)
                idx = int(str(row["custom_id"]).split("-")[0])
                hhmmss = str(row["custom_id"]).split("-")[-2:]
                body = str(row["translated_text"])
            except (ValueError, KeyError, TypeError):
                continue  # a broken line of a recording is skipped; the rest still counts
            twin = srt.get(idx)
            if twin:
                start_s, end_s = twin.start_s, twin.end_s
            else:
                start_s, end_s = (_hhmmss(x) - base for x in hhmmss)
            emit(f"{tag}:cap:{idx}:en", start_s, end_s, "caption", body, lang="en")
        return out
    for e in parse_srt(text, where=str(f.path)):
        if f.stream == "caption":
            body = " ".join(e.lines)
            emit(f"{tag}:cap:{e.index}", e.start_s, e.end_s, "caption", body, lang=_lang(body))
            continue
        for i, line in enumerate(e.lines):
            m = _SPEAKER.match(line)
            speaker, body = (m.group(1), m.group(2)) if m else (None, line)
            emit(f"{tag}:tr:{e.index}:{i}", e.start_s, e.end_s, "transcript", body, speaker, _lang(body))
    return out


def _twin_srt(f: HourFile) -> Path:
    return f.path.parent.parent / f.agent / f"DAY{f.day}" / f.path.name.replace(".jsonl", ".srt")


def _hhmmss(s: str) -> float:
    return int(s[0:2]) * 3600 + int(s[2:4]) * 60 + int(s[4:6])


def _lang(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"
