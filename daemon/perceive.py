"""`chorus transcribe` (a recording into transcripts, as the daemon would hear it live) and
`chorus frames` (what the frame store holds; retention now; frames found by text or time)."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from daemon import wiring
from daemon.cliutil import UserError, clock_of, open_store, out, parse_time, settings_of
from daemon.seeing import backfill


def read_wav(path: Path) -> np.ndarray:
    """float32 mono at 16 kHz from a 16-bit PCM WAV of any rate and channel count."""
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


def cmd_transcribe(args) -> int:
    from memory.records import Observation
    from models.bundled import resolve_whisper
    from models.speech import Transcriber
    from models.vad import Utterances

    settings = settings_of(args)
    clock = clock_of(settings)
    start = parse_time(clock, args.start, "--start")
    s = settings.speech
    audio = read_wav(args.path)
    gate = Utterances(threshold=s.vad_threshold, min_silence_ms=s.min_silence_ms, pad_ms=s.pad_ms,
                      max_utterance_s=s.max_utterance_s)
    model = Transcriber(resolve_whisper(s.model), device=s.device, compute_type=s.compute_type, threads=s.threads,
                        language=s.language, beam_size=s.beam_size)
    cuts = [c for i in range(0, len(audio), 16000) for c in gate.feed(audio[i:i + 16000])] + gate.flush()
    obs, seconds = [], 0.0
    for c in cuts:
        heard = model.transcribe(c.audio)
        seconds += heard.seconds
        t0 = start + c.start * 1000 // 16000
        for i, line in enumerate(heard.lines):
            a = t0 + int(line.start_s * 1000)
            obs.append(Observation(args.agent, "transcript", a, max(a, t0 + int(min(line.end_s, heard.audio_s) * 1000)),
                                   line.text, lang=heard.language, ext_id=f"asr-{t0}-{i}"))
    r = open_store(args, settings).add(obs) if obs else None
    data = {"file": str(args.path), "agent": args.agent, "audio_s": round(len(audio) / 16000, 1),
            "utterances": len(cuts), "lines": [{"start": clock.iso(o.start_ms), "text": o.text} for o in obs],
            "inserted": r.inserted if r else 0, "duplicates": r.duplicates if r else 0,
            "rtf": round(seconds / max(1e-9, sum(len(c.audio) for c in cuts) / 16000), 3) if cuts else None}
    text = "\n".join(f"{clock.label(o.start_ms)}  {o.text}" for o in obs) + \
        f"\n{data['inserted']} stored, {data['duplicates']} already there; {data['utterances']} utterances"
    out(args, data, text)
    return 0


def cmd_frames(args) -> int:
    settings = settings_of(args)
    clock = clock_of(settings)
    store = open_store(args, settings)
    frames = wiring.frame_store(settings, store)
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
        embedder, _ = wiring.build_vision(settings)
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
