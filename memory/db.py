"""One SQLite file: the driver that can load extensions, sqlite-vec, WAL, migrations, atomic().

Python's own `sqlite3` on many machines cannot load extensions, so the store goes through
sqlean.py (a drop-in build of sqlite3 with extension loading, wheels for x86_64 and aarch64).
One process writes; readers may open the same file in WAL mode.
"""

from __future__ import annotations

import errno
import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlean as sqlite3
import sqlite_vec

from memory.errors import SchemaError

logger = logging.getLogger(__name__)

Migration = tuple[str, Callable[[sqlite3.Connection], None]]


class Database:
    """A connection with explicit transactions; `atomic()` nests through SAVEPOINTs."""

    def __init__(self, path: str | Path, migrations: list[Migration], *, readonly: bool = False,
                 synchronous: str = "NORMAL"):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        uri = f"file:{self.path}?mode=ro" if readonly else self.path
        self.conn = sqlite3.connect(uri, uri=readonly, isolation_level=None, check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        self.conn.enable_load_extension(True)
        sqlite_vec.load(self.conn)
        self.conn.enable_load_extension(False)
        self.conn.execute("PRAGMA busy_timeout = 10000")
        self.conn.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            self.conn.execute("PRAGMA journal_mode = WAL")
            # NORMAL: a commit may be lost to a power cut, never corrupted; FULL: it is on disk
            self.conn.execute(f"PRAGMA synchronous = {'FULL' if synchronous == 'FULL' else 'NORMAL'}")
        self._depth = 0
        self._lock = threading.RLock()
        if not readonly:
            self.migrate(migrations)

    # -- transactions -------------------------------------------------------------------
    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A transaction, or a SAVEPOINT inside one; rolled back on any exception."""
        with self._lock:
            name = f"sp{self._depth}"
            begin, commit, rollback = (
                ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK")
                if self._depth == 0
                else (f"SAVEPOINT {name}", f"RELEASE {name}", f"ROLLBACK TO {name}")
            )
            self.conn.execute(begin)
            self._depth += 1
            try:
                yield self.conn
            except BaseException:
                self._depth -= 1
                if self.conn.in_transaction:  # SQLITE_FULL and friends may have rolled it back already
                    self.conn.execute(rollback)
                    if self._depth:
                        self.conn.execute(f"RELEASE {name}")
                raise
            self._depth -= 1
            self.conn.execute(commit)

    def cap_growth(self, reserve_bytes: int) -> None:
        """Let the file grow only while the file system keeps `reserve_bytes` free: a full disk
        breaks the whole box (journald, the broker's persistence), so the store stops short of it.
        Writes past the cap fail as SQLITE_FULL, exactly as on a disk that is really full."""
        free = shutil.disk_usage(Path(self.path).parent).free
        page = self.conn.execute("PRAGMA page_size").fetchone()[0]
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        self.conn.execute(f"PRAGMA max_page_count = {pages + max(0, free - reserve_bytes) // page}")

    def execute(self, sql: str, params: tuple | dict = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def close(self) -> None:
        self.conn.close()

    # -- migrations ---------------------------------------------------------------------
    def applied_migrations(self) -> list[str]:
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_ms INTEGER NOT NULL)"
        )
        return [r[0] for r in self.conn.execute("SELECT name FROM migrations ORDER BY rowid")]

    def migrate(self, migrations: list[Migration]) -> list[str]:
        """Apply the named migrations not yet recorded, in order, in one transaction that reads what
        is applied under the write lock: two processes opening an old file at once migrate it once."""
        known = {name for name, _ in migrations}
        with self.atomic():
            applied = self.applied_migrations()
            unknown = [name for name in applied if name not in known]
            if unknown:
                raise SchemaError(
                    f"{self.path} was written by a newer Chorus (unknown migrations: {', '.join(unknown)})"
                )
            done = []
            for name, step in migrations:
                if name in applied:
                    continue
                step(self.conn)
                self.conn.execute("INSERT INTO migrations VALUES (?, ?)", (name, int(time.time() * 1000)))
                done.append(name)
        for name in done:
            logger.info("applied migration %s to %s", name, self.path)
        return done


def is_full(e: BaseException) -> bool:
    """SQLITE_FULL (disk or max_page_count) or ENOSPC from the OS. sqlite-vec reports a full disk
    met while adding a vector table's chunk as its own error, without SQLite's code: a new
    encoder's first chunk (the second encoder's tables on a full disk) fails that way."""
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return True
    return isinstance(e, sqlite3.OperationalError) and (
        getattr(e, "sqlite_errorcode", None) == 13 or "disk is full" in str(e)
        or "Could not insert a new vector chunk" in str(e))
