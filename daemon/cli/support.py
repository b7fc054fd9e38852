"""What the handlers of `chorus` share: settings and the store named on the command line, times,
progress bars, the retrievers with their indices up to date, and printing. Imports nothing heavy
at the top: the table of commands imports this, and `chorus --help` stays fast."""

from __future__ import annotations

import json
import sys


class UserError(Exception):
    """A mistake on the command line: printed as one line, exit code 2."""


def settings_of(args):
    from daemon.settings import load_settings

    return load_settings(args.config)


def store_of(args, settings):
    """The store of `--db`, else of `store.path`."""
    from daemon import build

    return build.open_store(settings, args.db)


def parse_time(clock, text: str | None, what: str) -> int | None:
    from memory.errors import TimeFormatError

    if text is None:
        return None
    try:
        return clock.parse(text)
    except TimeFormatError as e:
        raise UserError(f"{what}: {e}") from None


def selection(args) -> tuple[set[int] | None, set[str] | None]:
    """--days and --agents of the egolife recordings."""
    try:
        days = {int(d) for d in args.days.split(",")} if args.days else None
    except ValueError:
        raise UserError(f"--days wants day numbers such as 1,2, not {args.days!r}") from None
    return days, set(args.agents.split(",")) if args.agents else None


def progress(desc: str, **kw):
    from functools import partial

    from tqdm import tqdm

    return partial(tqdm, desc=desc, unit=kw.pop("unit", "file"), file=sys.stderr, disable=None, **kw)


def retrievers_for(store, clock, settings, *, reset: bool = False, encoders: tuple[str, ...] = (),
                   embed: bool = True):
    """The retrievers of a store with every index up to date (also the vectors of `encoders`
    besides the configured one); a backlog of units to embed (the first run after an import)
    shows a progress bar. Without `embed`, vectors stay as they are (units not embedded yet
    have none)."""
    if not embed:
        from daemon import build

        r = build.retrievers(store, clock, settings)
        r.index.refresh()
        return r
    return _embedded(store, clock, settings, reset, encoders)


def question_retrievers(store, clock, settings):
    """The retrievers for one question asked on the command line: a short backlog of units to
    embed is embedded inline (the hybrid search does it), a long one (the first question after an
    import) is left to `chorus index` or the daemon, and said once: those units are searched by
    their words until then, so the question does not wait minutes behind the backlog."""
    from assistant.hybrid import INLINE_EMBED

    r = retrievers_for(store, clock, settings, embed=False)
    if r.dense_ok():
        second = settings.retrieval.second_encoder
        waiting = sum(vi.pending() for vi in (r.vectors()[0], r.event_vectors())) + (
            r.vectors(second)[0].pending() if second and r.dense_ok(second) else 0)
        if waiting > INLINE_EMBED:
            print(f"note: {waiting:,} units have no vectors yet; they are searched by their words until "
                  "`chorus index` (or the running daemon) embeds them", file=sys.stderr)
    return r


def _embedded(store, clock, settings, reset: bool, encoders: tuple[str, ...]):
    from tqdm import tqdm

    from daemon import build

    r = build.retrievers(store, clock, settings)
    if reset and settings.retrieval.dense:
        r.vectors()[0].reset()
        r.event_vectors().reset()
        if settings.retrieval.second_encoder and r.dense_ok(settings.retrieval.second_encoder):
            r.vectors(settings.retrieval.second_encoder)[0].reset()

    def bar(total: int, name: str):
        t = tqdm(total=total, desc=f"embedding {name}", unit="unit", file=sys.stderr, disable=None if total else True)
        return t.update

    r.prepare(bar, encoders=encoders)
    return r


def evidence_line(e: dict, most: int = 160) -> str:
    """An evidence item as one line: the lines that bear out the answer (`lines`; an older daemon
    sends none: its first line)."""
    text = " / ".join(e.get("lines") or e["text"].split("\n")[:1])
    return text if len(text) <= most else text[: most - 1] + "…"


def out(args, data: dict, text: str) -> None:
    print(json.dumps(data, ensure_ascii=False) if args.json else text)
