"""The systemd notify protocol in a few lines: READY, STATUS, EXTEND_TIMEOUT, WATCHDOG, STOPPING."""

from __future__ import annotations

import os
import socket


def notify(state: str) -> bool:
    """Send one datagram to $NOTIFY_SOCKET; False when not under systemd (or it is unreachable)."""
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):  # abstract namespace
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(addr)
            s.sendall(state.encode())
        return True
    except OSError:
        return False


def watchdog_period_s() -> float | None:
    """Half of WatchdogSec when systemd asked for pings to this process, else None."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2_000_000
