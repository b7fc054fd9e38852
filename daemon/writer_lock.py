"""One daemon per memory: `chorus run` holds an exclusive lock on `<db>.lock` for its whole life.

A second `chorus run` on the same file refuses to start (the first is untouched), and commands
that would change files under a running daemon's feet (`chorus frames --enforce`) ask first.
The kernel drops the lock when the process dies, however it dies: no stale lock to clean up.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class AlreadyRunning(RuntimeError):
    def __init__(self, db: str, pid: int | None):
        who = f"process {pid}" if pid else "another process"
        super().__init__(f"{db} is in use by a running chorus daemon ({who}); "
                         "stop it first (systemctl stop chorus) or use another --db")
        self.pid = pid


class WriterLock:
    def __init__(self, db: str | Path):
        self.db = str(db)
        self.path = Path(self.db + ".lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock for this process's life, or raise AlreadyRunning."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o640)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(self.db, self.holder()) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def holder(self) -> int | None:
        """The pid of the daemon holding the lock, None when nobody holds it."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = os.read(fd, 32).decode(errors="replace").strip()
                return int(text) if text.isdigit() else -1
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)
