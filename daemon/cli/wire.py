"""The wire commands: `replay` recordings as live agents over MQTT, and `load` (synthetic agents
against a broker on this machine, for a bounded time).

`load` is loopback only: a load generator pointed at a production broker by mistake would flood
real agents' memory, so any host other than this machine is refused.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
import time

import daemon.cli.options as options
from daemon.cli.options import Command
from daemon.cli.support import UserError, out, selection, settings_of

MAX_SECONDS = 3600


# -- replay -------------------------------------------------------------------------------------
def replay_arguments(p: argparse.ArgumentParser) -> None:
    for fmt in options.recording_formats(p, "replay", " --speed 600"):
        fmt.add_argument("--speed", type=float, default=1.0, help="time compression: 60 = an hour a minute")
        fmt.add_argument("--host", help="broker host (default: mqtt.host or localhost)")
        fmt.add_argument("--port", type=int, help="broker port (default: mqtt.port)")
        fmt.add_argument("--limit", type=int, help="stop after N captions")
        options.common(fmt)


def recorded_captions(args, clock):
    """The captions of the recording named on the command line, in time order."""
    from streams import egolife
    from streams.jsonl import read_jsonl
    from streams.replay import in_time_order

    if args.format == "egolife":
        days, agents = selection(args)
        by_hour: dict = {}
        for f in egolife.discover(args.path, days, agents):
            by_hour.setdefault((f.day, f.hour), []).append(f)
        return in_time_order([c for f in fs for c in egolife.read_hour(f, clock.at)] for _, fs in sorted(by_hour.items()))
    return in_time_order([[c for _, c in read_jsonl(args.path, clock.parse) if not isinstance(c, Exception)]])


def cmd_replay(args) -> int:
    import asyncio

    from daemon import build
    from streams.replay import replay
    from streams.topics import Topics

    settings = settings_of(args)
    clock = build.clock_of(settings)
    if not args.path.exists():
        raise UserError(f"{args.path} does not exist")
    captions = recorded_captions(args, clock)
    m = settings.mqtt
    t0 = time.perf_counter()
    sent = asyncio.run(replay(
        captions, host=args.host or m.host or "localhost", port=args.port or m.port, topics=Topics(m.root),
        speed=args.speed, limit=args.limit, **build.client_kwargs(settings),
        progress=lambda n: print(f"\r{n} captions sent", end="", file=sys.stderr),
    ))
    seconds = time.perf_counter() - t0
    out(args, {"sent": sent, "seconds": round(seconds, 2)}, f"\nreplayed {sent} captions in {seconds:.1f}s")
    return 0


REPLAY = Command("replay", "publish recordings as live agents over MQTT",
                 "chorus replay egolife ../shared/data/egolife/EgoLifeCap --days 1 --speed 600",
                 replay_arguments, cmd_replay)


# -- load ---------------------------------------------------------------------------------------
def load_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agents", type=int, default=6, help="number of synthetic agents (load00, load01, ...)")
    p.add_argument("--seconds", type=float, default=60, help="how long to send (bounded: at most 3600)")
    p.add_argument("--factor", type=float, default=10, help="times the realistic rates (captions 0.5/s, "
                   "audio chunks 2/s of 0.5 s, frames 1/s of 30 kB per agent)")
    p.add_argument("--kinds", default="caption,audio,frame", help="comma-separated: caption, audio, frame")
    p.add_argument("--port", type=int, help="broker port (default: mqtt.port); the host is always loopback")
    p.add_argument("--mqtt311", action="store_true", help="MQTT 3.1.1: audio/frame metadata in a JSON header line")
    options.common(p)


def loopback(host: str) -> bool:
    try:
        return all(ipaddress.ip_address(info[4][0]).is_loopback
                   for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP))
    except (OSError, ValueError):
        return False


def cmd_load(args) -> int:
    import asyncio

    from daemon import build
    from streams.load import REALISTIC, run_load
    from streams.topics import Topics

    settings = settings_of(args)
    m = settings.mqtt
    host = m.host or "127.0.0.1"
    if not loopback(host):
        raise UserError(f"chorus load runs against a broker on this machine only, not {host!r}")
    if not 0 < args.seconds <= MAX_SECONDS or args.agents < 1 or args.factor <= 0:
        raise UserError(f"--seconds must be in (0, {MAX_SECONDS}], --agents >= 1, --factor > 0")
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not kinds or set(kinds) - set(REALISTIC):
        raise UserError(f"--kinds: choose from {', '.join(REALISTIC)}")

    def progress(rep) -> None:
        print("\r" + "  ".join(f"{k} {n}" for k, n in rep.sent.items()), end="", file=sys.stderr)

    rep = asyncio.run(run_load(host, args.port or m.port, Topics(m.root), agents=args.agents, seconds=args.seconds,
                               factor=args.factor, kinds=kinds, conn=build.client_kwargs(settings),
                               v5=not args.mqtt311, progress=progress))
    rates = {k: round(n / rep.seconds, 1) for k, n in rep.sent.items()}
    data = {"agents": args.agents, "seconds": round(rep.seconds, 2), "factor": args.factor, "sent": rep.sent,
            "per_s": rates, "mb_per_s": round(sum(rep.bytes.values()) / rep.seconds / 1e6, 2),
            "behind_schedule_s": round(rep.late_s, 3), "first_caption": rep.caption_ids[:1],
            "last_caption": rep.caption_ids[-1:]}
    lines = [f"\n{args.agents} agents for {rep.seconds:.1f}s at {args.factor:g}x realistic rates"]
    lines += [f"  {k:8} {rep.sent[k]:7} sent  {rates[k]:8.1f}/s  {rep.bytes[k] / 1e6:8.1f} MB" for k in rep.sent]
    lines.append(f"  at worst {rep.late_s:.3f}s behind schedule")
    out(args, data, "\n".join(lines))
    return 0


LOAD = Command("load", "synthetic agents at N times real rates (loopback)",
               "chorus load --agents 6 --seconds 60 --factor 10", load_arguments, cmd_load)
