"""`chorus`: the command line. Heavy modules are imported inside the command that needs them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from daemon import logs


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="TOML configuration (default: $CHORUS_CONFIG or /etc/chorus/chorus.toml)")
    p.add_argument("--db", type=Path, help="SQLite memory file (default: store.path of the configuration)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("-v", "--verbose", action="count", default=0)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="chorus", description="Shared memory of a team of camera-wearing agents.")
    sub = ap.add_subparsers(dest="command", required=True)

    imp = sub.add_parser("import", help="import recordings into the memory")
    isub = imp.add_subparsers(dest="format", required=True)
    eg = isub.add_parser("egolife", help="an EgoLifeCap folder (DenseCaption/, Transcript/)")
    eg.add_argument("path", type=Path)
    eg.add_argument("--days", help="comma-separated day numbers, e.g. 1,2")
    eg.add_argument("--agents", help="comma-separated agent names, e.g. A1_JAKE,A2_ALICE")
    jl = isub.add_parser("jsonl", help="generic JSON lines, one observation a line (see README)")
    jl.add_argument("path", type=Path)
    for p in (eg, jl):
        _common(p)

    rt = sub.add_parser("retrieve", help="print the context an answering model would receive")
    rt.add_argument("question")
    rt.add_argument("--as-of", default="now", help="only memory recorded before this time ('DAY3 11:21:02', ISO 8601, epoch ms)")
    rt.add_argument("--agent", action="append", help="search only this agent (repeatable)")
    rt.add_argument("--option", action="append", default=[], help="a multiple-choice option (repeatable)")
    rt.add_argument("--asker", help="who asks: 'I' in the question means this agent")
    rt.add_argument("--budget", type=int, help="fine units in the context (default: retrieval.budget)")
    _common(rt)

    be = sub.add_parser("bench", help="measure retrieval on a question set")
    bsub = be.add_subparsers(dest="suite", required=True)
    eq = bsub.add_parser("egolifeqa", help="EgoLifeQA JSON files, asked as A1_JAKE at each query time")
    eq.add_argument("files", nargs="+", type=Path)
    eq.add_argument("--limit", type=int, help="only the first N questions")
    eq.add_argument("--retrievers", default="default,egomas-reference", help="comma-separated retrievers to compare")
    eq.add_argument("--budget", type=int, help="fine units per context (default: retrieval.budget)")
    _common(eq)

    st = sub.add_parser("status", help="what the memory holds")
    _common(st)

    ix = sub.add_parser("index", help="refresh or rebuild the derived indices")
    ix.add_argument("--rebuild", action="store_true", help="rebuild segments and indices from the observations")
    _common(ix)

    cf = sub.add_parser("config", help="configuration")
    csub = cf.add_subparsers(dest="action", required=True)
    ck = csub.add_parser("check", help="validate the configuration and exit non-zero on errors")
    _common(ck)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.setup(args.verbose)
    from daemon import commands  # late: keeps `chorus --help` fast
    from daemon.settings import ConfigError

    try:
        return commands.dispatch(args)
    except ConfigError as e:
        for line in e.problems:
            print(f"config: {line}", file=sys.stderr)
        return 2
    except commands.UserError as e:
        print(f"chorus: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def emit(args: argparse.Namespace, data: dict, text: str) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=None if args.json else 2) if args.json else text)


if __name__ == "__main__":
    sys.exit(main())
