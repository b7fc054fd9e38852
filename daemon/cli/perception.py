"""The perception commands: `transcribe` (a recording into transcripts, as the daemon would hear
it live) and `frames` (what the frame store holds; retention now; frames found by text or time)."""

from __future__ import annotations

import argparse
import wave
from pathlib import Path

import daemon.cli.options as options
from daemon.cli.options import Command
from daemon.cli.support import UserError, out, parse_time, settings_of, store_of


def read_wav(path: Path):
    """float32 mono at 16 kHz (a numpy array) from a 16-bit PCM WAV of any rate and channel count."""
    import numpy as np

    try:
        with wave.open(str(path)) as w:
            if w.getsampwidth() != 2:
                raise UserError(f"{path}: only 16-bit PCM WAV files are read")
            x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
            x = x.reshape(-1, w.getnchannels()).mean(axis=1)
            rate = w.getframerate()
    except (wave.Error, EOFError, OSError) as e:
        raise UserError(f"{path}: {e}") from e
    if rate != 16000:
        from scipy.signal import resample_poly

        g = np.gcd(16000, rate)
        x = resample_poly(x, 16000 // g, rate // g).astype(np.float32)
    return x


def transcribe_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=Path)
    p.add_argument("--agent", required=True, help="whose recording it is")
    p.add_argument("--start", required=True, help="capture time of its first sample ('DAY1 11:00:00', ISO 8601, ...)")
    options.common(p)


def cmd_transcribe(args) -> int:
    from daemon import build
    from daemon.audio_stream import hear_recording, load_transcriber

    settings = settings_of(args)
    clock = build.clock_of(settings)
    start = parse_time(clock, args.start, "--start")
    audio = read_wav(args.path)
    cuts, obs, seconds = hear_recording(args.agent, start, audio, settings.speech, load_transcriber(settings.speech))
    r = store_of(args, settings).add(obs) if obs else None
    data = {"file": str(args.path), "agent": args.agent, "audio_s": round(len(audio) / 16000, 1),
            "utterances": len(cuts), "lines": [{"start": clock.iso(o.start_ms), "text": o.text} for o in obs],
            "inserted": r.inserted if r else 0, "duplicates": r.duplicates if r else 0,
            "rtf": round(seconds / max(1e-9, sum(len(c.audio) for c in cuts) / 16000), 3) if cuts else None}
    text = "\n".join(f"{clock.label(o.start_ms)}  {o.text}" for o in obs) + \
        f"\n{data['inserted']} stored, {data['duplicates']} already there; {data['utterances']} utterances"
    out(args, data, text)
    return 0


TRANSCRIBE = Command("transcribe", "a WAV recording of one agent into transcripts",
                     'chorus transcribe kitchen.wav --agent robot1 --start "DAY1 11:00:00"',
                     transcribe_arguments, cmd_transcribe)


def frames_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--search", help="frames matching this text (needs vision.embedder)")
    p.add_argument("--at", help="frames nearest this time (with --agent)")
    options.agent(p, "only this agent (repeatable)")
    options.as_of(p, "only frames captured before this time")
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--enforce", action="store_true", help="apply the retention policy now")
    options.common(p)


def cmd_frames(args) -> int:
    from daemon import build

    settings = settings_of(args)
    clock = build.clock_of(settings)
    store = store_of(args, settings)
    frames = build.frame_store(settings, store)
    data: dict = {"root": str(frames.root), "counts": frames.counts()}
    lines = [f"{frames.root}: {data['counts']['frames']} frames, {data['counts']['bytes'] / 1e6:.1f} MB "
             f"(quota {settings.frames.max_mb:.0f} MB, {settings.frames.max_age_h:.0f} h)"]
    if args.enforce:
        from daemon.writer_lock import WriterLock

        pid = WriterLock(store.path).holder()
        if pid:
            raise UserError(f"a chorus daemon (process {pid}) holds {store.path} and applies the retention policy "
                            f"itself every {settings.frames.retention_every_s:g} s; --enforce deletes nothing beside it")
        r = frames.enforce(max_bytes=int(settings.frames.max_mb * 1e6), max_age_ms=int(settings.frames.max_age_h * 3.6e6))
        removed = frames.sweep()
        data["retention"] = {"deleted": r.deleted, "freed": r.freed, "kept": r.kept, "stray_files": removed}
        lines.append(f"retention: {r.deleted} deleted ({r.freed / 1e6:.1f} MB), {r.kept} kept; {removed} stray files")
    found = []
    if args.search:
        from daemon.frame_worker import backfill

        embedder, _ = build.vision(settings)
        if embedder is None:
            raise UserError("--search needs vision.embedder (an ONNX CLIP/SigLIP folder)")
        frames.ensure_vectors(embedder.name, embedder.dim)
        data["embedded"] = backfill(frames, embedder)
        as_of = parse_time(clock, args.as_of, "--as-of")
        found = [(f, d) for f, d in frames.search(embedder.embed_texts([args.search])[0], k=args.limit,
                                                  as_of_ms=as_of, agents=tuple(args.agent or ()) or None)]
    elif args.at:
        at = parse_time(clock, args.at, "--at")
        if not args.agent:
            raise UserError("--at needs --agent")
        found = [(f, None) for a in args.agent for f in frames.near(a, at, at, limit=args.limit)]
    if found:
        data["frames"] = [f.as_json(clock, **({"distance": round(d, 4)} if d is not None else {})) for f, d in found]
        lines += [f"{clock.label(f.ts_ms)}  {f.agent}  {f.path}" + (f"  ({d:.3f})" if d is not None else "")
                  for f, d in found]
    out(args, data, "\n".join(lines))
    return 0


FRAMES = Command("frames", "stored camera frames: counts, retention, search",
                 'chorus frames --at "DAY1 11:20:00" --agent robot1', frames_arguments, cmd_frames)
