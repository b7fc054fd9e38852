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


class _Help(argparse.RawDescriptionHelpFormatter):
    """Examples kept as written; each sub-command and its help on one line in 80 columns."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=20)
        self._action_max_length = 16  # argparse leaves the indent of sub-command names out of its measure


def _command(sub, name: str, help: str, example: str) -> argparse.ArgumentParser:
    """A sub-command: its one-line help in the parent's list, and one example of real use."""
    return sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".",
                          epilog=f"example:\n  {example}", formatter_class=_Help)


def _commands(parser: argparse.ArgumentParser, dest: str):
    return parser.add_subparsers(dest=dest, required=True, title="commands", metavar="COMMAND")


def _recording_formats(parent: argparse.ArgumentParser, verb: str, tail: str) -> list[argparse.ArgumentParser]:
    """The `egolife DIR` and `jsonl FILE` sub-commands shared by `import` and `replay`."""
    fmt = _commands(parent, "format")
    eg = _command(fmt, "egolife", "an EgoLifeCap folder (DenseCaption/, Transcript/)",
                  f"chorus {verb} egolife ../shared/data/egolife/EgoLifeCap --days 1{tail}")
    eg.add_argument("path", type=Path)
    eg.add_argument("--days", help="comma-separated day numbers, e.g. 1,2")
    eg.add_argument("--agents", help="comma-separated agent names, e.g. A1_JAKE,A2_ALICE")
    jl = _command(fmt, "jsonl", "generic JSON lines, one observation a line (see README)",
                  f"chorus {verb} jsonl robot1.jsonl{tail}")
    jl.add_argument("path", type=Path)
    return [eg, jl]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="chorus", description="Shared memory of a team of camera-wearing agents.",
                                 formatter_class=_Help, epilog="`chorus COMMAND --help` shows a command's options and an example.")
    sub = _commands(ap, "command")

    imp = _command(sub, "import", "import recordings into the memory",
                   "chorus import egolife ../shared/data/egolife/EgoLifeCap --days 1,2 --db var/chorus.sqlite")
    for p in _recording_formats(imp, "import", ""):
        _common(p)

    rt = _command(sub, "retrieve", "print the context an answering model would receive",
                  'chorus retrieve "Who used the screwdriver first?" --as-of "DAY3 11:21:02" --asker A1_JAKE')
    rt.add_argument("question")
    rt.add_argument("--as-of", default="now", help="only memory recorded before this time ('DAY3 11:21:02', ISO 8601, epoch ms)")
    rt.add_argument("--agent", action="append", help="search only this agent (repeatable)")
    rt.add_argument("--option", action="append", default=[], help="a multiple-choice option (repeatable)")
    rt.add_argument("--asker", help="who asks: 'I' in the question means this agent")
    rt.add_argument("--budget", type=int, help="fine units in the context (default: retrieval.budget)")
    rt.add_argument("--planner", choices=["llm", "rule"],
                    help="EgoMAS retrieval: shared memory, this planner, per-agent units (default: flat BM25)")
    _common(rt)

    ak = _command(sub, "ask", "answer a question from the memory with the local LLM",
                  'chorus ask "Who used the screwdriver first?" --option Tasha --option Alice --option Shure '
                  '--option Lucia --as-of "DAY3 11:21:02"')
    ak.add_argument("question")
    ak.add_argument("--option", action="append", default=[], help="a multiple-choice option (repeatable, A-D)")
    ak.add_argument("--as-of", default="now", help="only memory recorded before this time")
    ak.add_argument("--asker", help="who asks: 'I' in the question means this agent")
    ak.add_argument("--agent", action="append", help="search only these agents (repeatable)")
    ak.add_argument("--planner", choices=["llm", "rule"], help="default: answer.planner")
    _common(ak)

    be = _command(sub, "bench", "measure retrieval and answers on a question set",
                  "chorus bench egolifeqa EgoLifeQA_A1_JAKE_DAY1.json --limit 50")
    bsub = _commands(be, "suite")
    eq = _command(bsub, "egolifeqa", "EgoLifeQA JSON files, asked as A1_JAKE at each query time",
                  "chorus bench egolifeqa EgoLifeQA_A1_JAKE_DAY1.json EgoLifeQA_A1_JAKE_DAY2.json --answer --every 5")
    eq.add_argument("files", nargs="+", type=Path)
    eq.add_argument("--limit", type=int, help="only the first N questions")
    eq.add_argument("--every", type=int, default=1, help="only every K-th question (a spread-out sample)")
    eq.add_argument("--retrievers", default="default,egomas-reference",
                    help="comma-separated retrievers to compare; a hybrid one may end in @ENCODER "
                         "(default@minilm,default@use-multilingual)")
    eq.add_argument("--before", help="only the questions asked before this time ('DAY3 00:00')")
    eq.add_argument("--as-is", action="store_true",
                    help="measure the vectors as they are, without embedding the units not embedded yet (with "
                         "--before: a memory embedded up to then, in store order, which is the order of time)")
    eq.add_argument("--loo", action="store_true",
                    help="also leave-one-day-out: each day measured with weights searched on the other days")
    eq.add_argument("--budget", type=int, help="fine units per context (default: retrieval.budget)")
    eq.add_argument("--answer", action="store_true", help="answer with the LLM: accuracy and the EgoMAS ablation")
    eq.add_argument("--cells", default="full,no-shared,no-dynamic,neither",
                    help="ablation cells with --answer: full, no-shared, no-dynamic, neither")
    eq.add_argument("--planner", choices=["llm", "rule"], help="planner for --answer (default: answer.planner)")
    eq.add_argument("--open", action="store_true",
                    help="with --answer: ask without the options and count how answers were made (model, extractive, "
                         "not found)")
    _common(eq)

    co = _command(sub, "consolidate", "write shared-memory events for closed windows",
                  'chorus consolidate --from "DAY1 11:00" --to "DAY1 13:00" --dry-run')
    co.add_argument("--from", dest="start", help="only windows ending after this time")
    co.add_argument("--to", dest="end", help="only windows starting before this time")
    co.add_argument("--until", help="windows ending at or before this time are closed (default: now)")
    co.add_argument("--dry-run", action="store_true", help="print prompts and token counts; call no model")
    co.add_argument("--force", action="store_true", help="rebuild windows even when their inputs did not change")
    _common(co)

    st = _command(sub, "status", "what the memory holds", "chorus status --db var/chorus.sqlite")
    _common(st)

    ix = _command(sub, "index", "refresh or rebuild the derived indices", "chorus index --rebuild")
    ix.add_argument("--rebuild", action="store_true", help="rebuild segments and indices from the observations")
    _common(ix)

    rn = _command(sub, "run", "the daemon: captions in over MQTT, answers out",
                  "chorus run --config /etc/chorus/chorus.toml")
    _common(rn)

    rp = _command(sub, "replay", "publish recordings as live agents over MQTT",
                  "chorus replay egolife ../shared/data/egolife/EgoLifeCap --days 1 --speed 600")
    for p in _recording_formats(rp, "replay", " --speed 600"):
        p.add_argument("--speed", type=float, default=1.0, help="time compression: 60 = an hour a minute")
        p.add_argument("--host", help="broker host (default: mqtt.host or localhost)")
        p.add_argument("--port", type=int, help="broker port (default: mqtt.port)")
        p.add_argument("--limit", type=int, help="stop after N captions")
        _common(p)

    tr = _command(sub, "transcribe", "a WAV recording of one agent into transcripts",
                  'chorus transcribe kitchen.wav --agent robot1 --start "DAY1 11:00:00"')
    tr.add_argument("path", type=Path)
    tr.add_argument("--agent", required=True, help="whose recording it is")
    tr.add_argument("--start", required=True, help="capture time of its first sample ('DAY1 11:00:00', ISO 8601, ...)")
    _common(tr)

    fr = _command(sub, "frames", "stored camera frames: counts, retention, search",
                  'chorus frames --at "DAY1 11:20:00" --agent robot1')
    fr.add_argument("--search", help="frames matching this text (needs vision.embedder)")
    fr.add_argument("--at", help="frames nearest this time (with --agent)")
    fr.add_argument("--agent", action="append", help="only this agent (repeatable)")
    fr.add_argument("--as-of", default="now", help="only frames captured before this time")
    fr.add_argument("--limit", type=int, default=5)
    fr.add_argument("--enforce", action="store_true", help="apply the retention policy now")
    _common(fr)

    ld = _command(sub, "load", "synthetic agents at N times real rates (loopback)",
                  "chorus load --agents 6 --seconds 60 --factor 10")
    ld.add_argument("--agents", type=int, default=6, help="number of synthetic agents (load00, load01, ...)")
    ld.add_argument("--seconds", type=float, default=60, help="how long to send (bounded: at most 3600)")
    ld.add_argument("--factor", type=float, default=10, help="times the realistic rates (captions 0.5/s, "
                    "audio chunks 2/s of 0.5 s, frames 1/s of 30 kB per agent)")
    ld.add_argument("--kinds", default="caption,audio,frame", help="comma-separated: caption, audio, frame")
    ld.add_argument("--port", type=int, help="broker port (default: mqtt.port); the host is always loopback")
    ld.add_argument("--mqtt311", action="store_true", help="MQTT 3.1.1: audio/frame metadata in a JSON header line")
    _common(ld)

    ch = _command(sub, "chat", "ask questions interactively (daemon or in process)", "chorus chat --asker A1_JAKE")
    ch.add_argument("--asker", help="who asks: 'I' in the questions means this agent")
    ch.add_argument("--local", action="store_true", help="answer in process even when a daemon runs")
    _common(ch)

    cf = _command(sub, "config", "check the configuration", "chorus config check --config /etc/chorus/chorus.toml")
    csub = _commands(cf, "action")
    ck = _command(csub, "check", "validate the configuration; exit code 2 on errors",
                  "chorus config check --config /etc/chorus/chorus.toml")
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
    except BrokenPipeError:  # `chorus ... | head`
        sys.stderr.close()
        return 0


def emit(args: argparse.Namespace, data: dict, text: str) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=None if args.json else 2) if args.json else text)


if __name__ == "__main__":
    sys.exit(main())
