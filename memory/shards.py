"""One day shard of a lexical index and its files beside the database: written whole into a
temporary folder, fsync'd, then renamed, so a crash leaves the old shard or the new one; the
manifest naming the shards is replaced the same way. The files are a cache of the store."""

from __future__ import annotations

import json
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import bm25s
import numpy as np


@dataclass
class Shard:
    key: int
    rev: int
    ids: np.ndarray
    agents: np.ndarray
    starts: np.ndarray
    asof: np.ndarray
    bm25: bm25s.BM25
    df: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.ids)

    def column(self, token: str) -> tuple[np.ndarray, np.ndarray] | None:
        j = self.bm25.vocab_dict.get(token)
        if j is None:
            return None
        s = self.bm25.scores
        a, b = s["indptr"][j], s["indptr"][j + 1]
        return s["indices"][a:b], s["data"][a:b]


def fill_df(shard: Shard) -> None:
    """The shard's document frequencies, read from its postings."""
    indptr = shard.bm25.scores["indptr"]
    shard.df = {t: int(indptr[j + 1] - indptr[j]) for t, j in shard.bm25.vocab_dict.items() if t}


def read_shard(folder: Path, key: int) -> Shard:
    d = folder / str(key)
    meta = np.load(d / "meta.npz")
    info = json.loads((d / "info.json").read_text())
    bm = bm25s.BM25.load(str(d / "bm25"), show_progress=False)
    shard = Shard(key, info["rev"], meta["ids"], meta["agents"], meta["starts"], meta["asof"], bm)
    if not len(shard.ids) == len(shard.agents) == len(shard.starts) == info["n"]:
        raise ValueError(f"shard holds {len(shard.ids)} rows, its info says {info['n']}")
    fill_df(shard)
    return shard


def write_shard(folder: Path, shard: Shard) -> None:
    final = folder / str(shard.key)
    tmp = folder / f".{shard.key}.tmp{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shard.bm25.save(str(tmp / "bm25"), show_progress=False)
    np.savez(tmp / "meta.npz", ids=shard.ids, agents=shard.agents, starts=shard.starts, asof=shard.asof)
    (tmp / "info.json").write_text(json.dumps({"rev": shard.rev, "n": shard.n}))
    _sync_tree(tmp)  # on disk before the name says it is there: a crash leaves the old or the new
    shutil.rmtree(final, ignore_errors=True)
    try:
        os.rename(tmp, final)
        _sync_dir(folder)
    except OSError:  # another thread saved the same shard first: theirs is as good
        shutil.rmtree(tmp, ignore_errors=True)


def write_manifest(folder: Path, manifest: dict) -> None:
    write_json(folder / "manifest.json", manifest)


def write_json(path: Path, data) -> None:
    """`data` as JSON at `path`, whole or not at all: a temporary file of this process and thread,
    synced, then renamed over it (two writers never share a temporary file)."""
    folder = path.parent
    tmp = folder / f".{path.stem}.tmp{os.getpid()}-{threading.get_ident()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, ensure_ascii=False))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _sync_dir(folder)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _sync_tree(folder: Path) -> None:
    """fsync every file under `folder`, then the folders themselves."""
    for p in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())
        else:
            _sync_dir(p)
    _sync_dir(folder)


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
