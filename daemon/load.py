"""`chorus load`: synthetic agents against a broker on this machine, for a bounded time.

Loopback only: a load generator pointed at a production broker by mistake would flood real
agents' memory, so any host other than this machine is refused.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys

from daemon import wiring
from daemon.settings import Settings

MAX_SECONDS = 3600


def loopback(host: str) -> bool:
    try:
        return all(ipaddress.ip_address(info[4][0]).is_loopback
                   for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP))
    except (OSError, ValueError):
        return False


def cmd_load(args, settings: Settings, user_error: type[Exception], out) -> int:
    from streams.load import REALISTIC, run_load
    from streams.topics import Topics

    m = settings.mqtt
    host = m.host or "127.0.0.1"
    if not loopback(host):
        raise user_error(f"chorus load runs against a broker on this machine only, not {host!r}")
    if not 0 < args.seconds <= MAX_SECONDS or args.agents < 1 or args.factor <= 0:
        raise user_error(f"--seconds must be in (0, {MAX_SECONDS}], --agents >= 1, --factor > 0")
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not kinds or set(kinds) - set(REALISTIC):
        raise user_error(f"--kinds: choose from {', '.join(REALISTIC)}")

    def progress(rep) -> None:
        print("\r" + "  ".join(f"{k} {n}" for k, n in rep.sent.items()), end="", file=sys.stderr)

    rep = asyncio.run(run_load(host, args.port or m.port, Topics(m.root), agents=args.agents, seconds=args.seconds,
                               factor=args.factor, kinds=kinds, conn=wiring.client_kwargs(settings),
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
