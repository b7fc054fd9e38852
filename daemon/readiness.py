"""What the daemon says when it is ready, and what `chorus status` prints: how to ask, what the
memory holds, and the catch-up work queued behind (units to embed, windows to consolidate) with
an estimate of its time.

The counts are read with SQL alone (no model is loaded): a unit waits for its vector while its
row's revision is newer than the one recorded in `vector_indices`; a window waits while it was
never consolidated or changed since. Until the vectors are there a question is answered from
lexical search and the vectors embedded so far (the retriever never embeds more than
`INLINE_EMBED` units inline), so the first answer does not wait for the backlog.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Rates on 2 cores, for the estimate only (docs/figures.md): the daemon's first start over the
# imported week (`tests/bench_first_start.py --watch`: MiniLM's 31,823 units in 225 s beside the
# consolidation, one window by base in 21 to 27 s); USE multilingual from `chorus index` on the
# week beside a consolidation (31,823 units in 457 s, thirteenth round); the other models from
# earlier runs (a model by path: as base).
EMBED_UNITS_S = {"minilm": 140.0, "use-multilingual": 70.0}
WINDOW_S = {"tiny": 10.5, "base": 22.0, "small": 21.9}
TABLES = {"minilm": ("segments", "events"), "use-multilingual": ("segments_use", "events_use")}


@dataclass(frozen=True)
class Backlog:
    units: int  # segments and events waiting for a vector of the configured encoder
    windows: int  # 10-minute windows waiting for consolidation
    embed_s: float
    consolidate_s: float

    @property
    def empty(self) -> bool:
        return not self.units and not self.windows

    def as_dict(self) -> dict:
        return asdict(self)


def backlog(store, encoder: str = "minilm", dense: bool = True, model: str = "base", second: str = "") -> Backlog:
    """The catch-up work queued in this memory (counts only: no model is loaded); `model`: the
    consolidation's (a bundled profile or a path); `second`: the second encoder, whose vectors
    cover the units only (`retrieval.second_encoder`)."""
    from memory.events import EventStore

    units, embed_s = 0, 0.0
    todo = [(encoder, ("segments", "events"))] + ([(second, ("segments",))] if second and second != encoder else [])
    for enc, tables in todo if dense else ():
        n = sum(store.unindexed(name, table) for name, table in zip(TABLES[enc], tables, strict=False))
        units += n
        embed_s += n / EMBED_UNITS_S[enc]
    windows = EventStore(store).pending_count()
    return Backlog(units, windows, round(embed_s, 1), round(windows * WINDOW_S.get(model, WINDOW_S["base"]), 1))


def duration(seconds: float) -> str:
    """'40 s', '12 min', '1 h 05 min'."""
    s = round(seconds)
    if s < 90:
        return f"{s} s"
    if s < 3600:
        return f"{round(s / 60)} min"
    return f"{s // 3600} h {round(s % 3600 / 60):02d} min"


def catch_up_line(b: Backlog) -> str:
    if b.empty:
        return "no catch-up work queued: every unit has its vector and every closed window its events"
    parts = []
    if b.units:
        parts.append(f"{b.units:,} units to embed (about {duration(b.embed_s)})")
    if b.windows:
        parts.append(f"{b.windows:,} windows to consolidate (about {duration(b.consolidate_s)}, "
                     "giving way to questions)")
    lexical = " from lexical search and the vectors embedded so far" if b.units else ""
    return f"catch-up queued: {'; '.join(parts)}; questions are answered meanwhile{lexical}"


def ready_lines(model: str, db, b: Backlog, *, web: str | None = None) -> list[str]:
    """The daemon's INFO lines once it serves (the first keeps ' ready: ' for scripts that wait on it)."""
    ask = "ask with `chorus chat`" + (f" or at {web}" if web else "")
    return [f"ready: model {model}, memory {db}; {ask}", catch_up_line(b)]


def status_text(data: dict) -> str:
    """`chorus status` as readable lines (`--json` prints `data` itself)."""
    c = data["counts"]
    span = f"{data['first']} .. {data['last']}" if data.get("first") else "empty"
    lines = [
        f"memory      {data['db']}",
        f"holds       {c.get('observations', 0):,} observations, {c.get('segments', 0):,} segments, "
        f"{c.get('windows', 0):,} windows, {c.get('events', 0):,} events",
        f"agents      {', '.join(data['agents']) or 'none yet'}",
        f"time span   {span}",
    ]
    b = data.get("backlog")
    if b is not None:
        lines.append(f"catch-up    {catch_up_line(Backlog(**b)).removeprefix('catch-up queued: ')}")
    d = data.get("daemon")
    if d is None:
        lines.append(f"daemon      no broker reachable at {data.get('broker', '?')}")
    else:
        info = d.get("info") or {}
        who = f", pid {info['pid']}, model {info.get('model')}" if info.get("pid") else ""
        lines.append(f"daemon      {d.get('status', 'unknown')} at {data.get('broker', '?')}{who}")
    return "\n".join(lines)
