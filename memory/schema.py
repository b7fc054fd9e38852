"""The store's schema as named migrations, applied in order and recorded in `migrations`.

Never edit a migration that has shipped: add a new one. Tests open a file made by the first
migration alone and check that the later ones carry its rows forward.
"""

from __future__ import annotations

import sqlean as sqlite3


def m0001_core(conn: sqlite3.Connection) -> None:
    conn.execute(
        """CREATE TABLE agents (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_ms INTEGER NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE observations (
            id INTEGER PRIMARY KEY,
            agent_id INTEGER NOT NULL REFERENCES agents(id),
            kind TEXT NOT NULL CHECK (kind IN ('caption', 'transcript', 'frame_caption')),
            start_ms INTEGER NOT NULL,
            end_ms INTEGER NOT NULL,
            text TEXT NOT NULL,
            speaker TEXT,
            lang TEXT,
            ext_id TEXT NOT NULL,
            recorded_ms INTEGER NOT NULL,
            UNIQUE (agent_id, ext_id)
        )"""
    )
    conn.execute("CREATE INDEX observations_time ON observations (agent_id, start_ms)")
    conn.execute(
        """CREATE TABLE segments (
            id INTEGER PRIMARY KEY,
            agent_id INTEGER NOT NULL REFERENCES agents(id),
            start_ms INTEGER NOT NULL,
            end_ms INTEGER NOT NULL,
            text TEXT NOT NULL,
            obs_ids TEXT NOT NULL,
            UNIQUE (agent_id, start_ms)
        )"""
    )
    conn.execute(
        """CREATE TABLE windows (
            start_ms INTEGER PRIMARY KEY,
            end_ms INTEGER NOT NULL,
            state TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed', 'consolidated')),
            input_hash TEXT,
            updated_ms INTEGER NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            window_start_ms INTEGER NOT NULL REFERENCES windows(start_ms),
            start_ms INTEGER NOT NULL,
            end_ms INTEGER NOT NULL,
            who TEXT NOT NULL,
            what TEXT NOT NULL,
            place TEXT,
            how TEXT,
            model TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            input_hash TEXT NOT NULL,
            created_ms INTEGER NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX events_window ON events (window_start_ms)")


def m0002_change_log(conn: sqlite3.Connection) -> None:
    """A revision counter per segment and event, so derived indices refresh only what changed."""
    conn.execute("ALTER TABLE segments ADD COLUMN rev INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE events ADD COLUMN rev INTEGER NOT NULL DEFAULT 0")
    # the end of the segment's last observation: the as-of cut-off uses it, not the bucket end
    conn.execute("ALTER TABLE segments ADD COLUMN last_ms INTEGER NOT NULL DEFAULT 0")
    conn.execute(
        """UPDATE segments SET last_ms = (
             SELECT COALESCE(MAX(o.end_ms), segments.end_ms) FROM observations o
             WHERE o.agent_id = segments.agent_id
               AND o.start_ms >= segments.start_ms AND o.start_ms < segments.end_ms)"""
    )
    conn.execute("CREATE TABLE revisions (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    conn.execute("INSERT INTO revisions VALUES ('memory', 1)")
    conn.execute("UPDATE segments SET rev = 1")
    conn.execute("UPDATE events SET rev = 1")
    conn.execute("CREATE INDEX segments_rev ON segments (rev)")
    conn.execute("CREATE INDEX segments_time ON segments (start_ms)")


def m0003_consolidation(conn: sqlite3.Connection) -> None:
    """The revision of a window's latest data and of its last consolidation: newer data = rebuild."""
    conn.execute("ALTER TABLE windows ADD COLUMN rev INTEGER NOT NULL DEFAULT 1")
    conn.execute("ALTER TABLE windows ADD COLUMN consolidated_rev INTEGER")
    conn.execute("CREATE INDEX events_end ON events (end_ms)")


def m0004_vectors(conn: sqlite3.Connection) -> None:
    """What each vector index holds: its model, dimension and the store revision it has seen.
    The vec0 tables themselves are made by `memory.vectors` with the dimension of their model."""
    conn.execute(
        """CREATE TABLE vector_indices (
            name TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            rev INTEGER NOT NULL DEFAULT 0
        )"""
    )


def m0005_frames(conn: sqlite3.Connection) -> None:
    """Camera frames: the JPEG lives on disk (path relative to the frames folder), its facts here.
    Their vectors (with a vision embedder) live in a vec0 table made at run time, recorded in
    `vector_indices` like the text vectors."""
    conn.execute(
        """CREATE TABLE frames (
            id INTEGER PRIMARY KEY,
            agent_id INTEGER NOT NULL REFERENCES agents(id),
            ts_ms INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            path TEXT NOT NULL UNIQUE,
            bytes INTEGER NOT NULL,
            width INTEGER,
            height INTEGER,
            ext_id TEXT NOT NULL,
            recorded_ms INTEGER NOT NULL,
            UNIQUE (agent_id, ext_id)
        )"""
    )
    conn.execute("CREATE INDEX frames_time ON frames (ts_ms)")
    conn.execute("CREATE INDEX frames_agent_time ON frames (agent_id, ts_ms)")


def m0006_entities(conn: sqlite3.Connection) -> None:
    """The people of each segment (`memory.entities`): wearer, speakers, names in captions."""
    conn.execute(
        """CREATE TABLE person_encounters (
            person TEXT NOT NULL,
            segment_id INTEGER NOT NULL,
            agent_id INTEGER NOT NULL,
            start_ms INTEGER NOT NULL,
            asof_ms INTEGER NOT NULL,
            role INTEGER NOT NULL,
            PRIMARY KEY (person, segment_id)
        ) WITHOUT ROWID"""
    )
    conn.execute("CREATE INDEX person_encounters_segment ON person_encounters (segment_id)")


MIGRATIONS = [
    ("0001_core", m0001_core),
    ("0002_change_log", m0002_change_log),
    ("0003_consolidation", m0003_consolidation),
    ("0004_vectors", m0004_vectors),
    ("0005_frames", m0005_frames),
    ("0006_entities", m0006_entities),
]
