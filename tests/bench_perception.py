"""Perception benchmark (not a test): speech real-time factor and word error rate on espeak-ng
sentences, how many agents' speech streams one box keeps up with, frame storage per agent-hour
and the retention policy holding a quota.

    .venv/bin/python tests/bench_perception.py [--threads 2] [--beam 1] [--photo FILE.jpg]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from memory.frames import FrameStore  # noqa: E402
from memory.store import Store  # noqa: E402
from models.bundled import whisper_tiny_en  # noqa: E402
from models.speech import Transcriber, pcm16_to_float  # noqa: E402
from models.vad import Utterances  # noqa: E402
from tests.media_util import SENTENCES, conversation, jpeg, wer  # noqa: E402

MORE = [
    "Please bring the green toolbox from the garage to the workshop.",
    "The delivery robot left two packages next to the mailbox at noon.",
    "Alice said the meeting moved to three thirty in the small conference room.",
]


def speech(threads: int, beam: int, device: str) -> dict:
    t = Transcriber(whisper_tiny_en(), threads=threads, beam_size=beam, device=device)
    sentences = SENTENCES + MORE
    pcm = conversation(sentences, gap_s=1.5)
    x = pcm16_to_float(pcm.tobytes())
    t.transcribe(x[:16000])  # warm-up
    gate = Utterances()
    vad_s = asr_s = speech_s = 0.0
    hyps = []
    for i in range(0, len(x), 1600):  # 100 ms chunks, as agents send them
        t0 = time.perf_counter()
        cuts = gate.feed(x[i:i + 1600])
        vad_s += time.perf_counter() - t0
        for c in cuts:
            h = t.transcribe(c.audio)
            asr_s += h.seconds
            speech_s += h.audio_s
            hyps.append(" ".join(line.text for line in h.lines))
    audio_s = len(x) / 16000
    total = vad_s + asr_s
    return {
        "device": t.device, "compute": t.compute_type, "threads": threads, "beam": beam, "sentences": len(sentences),
        "utterances": len(hyps), "audio_s": round(audio_s, 1), "speech_s": round(speech_s, 1),
        "rtf_speech": round(asr_s / speech_s, 3), "rtf_vad": round(vad_s / audio_s, 4),
        "rtf_stream": round(total / audio_s, 3),
        "streams_all_speech": int(1 / (asr_s / speech_s + vad_s / audio_s)),
        "streams_conversation": int(audio_s / total),
        "wer": round(wer(" ".join(sentences), " ".join(hyps)), 3),
        "hyps": hyps,
    }


def frames(photo: Path | None) -> dict:
    from PIL import Image

    if photo:
        img = Image.open(photo).convert("RGB").resize((640, 480))
    else:  # a synthetic scene: gradients, blocks and sensor noise
        yy, xx = np.mgrid[0:480, 0:640]
        a = np.stack([xx * 0.3, yy * 0.4, (xx + yy) * 0.15], -1)
        a[100:300, 200:400] = (180, 60, 40)
        a += np.random.default_rng(0).normal(0, 6, a.shape)
        img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
    sizes = {}
    for q in (70, 85):
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=q)
        sizes[q] = len(buf.getvalue())
    with tempfile.TemporaryDirectory() as d:
        fs = FrameStore(Store(Path(d) / "m.sqlite"), Path(d) / "frames")
        t0 = time.perf_counter()
        n, t_base, quota = 600, 1735700000000, 2_000_000
        for i in range(n):  # 10 agent-minutes at 1 fps, small frames, under a 2 MB quota
            fs.add("cam", t_base + i * 1000, i, jpeg((120, 90, 60), (320, 240), noise=20, seed=i))
            if i % 60 == 59:
                fs.enforce(max_bytes=quota, max_age_ms=10**12, now_ms=t_base + i * 1000)
        write_s = time.perf_counter() - t0
        on_disk = sum(p.stat().st_size for p in (Path(d) / "frames").rglob("*.jpg"))
        kept = fs.counts()
    return {"frame_640x480_q70": sizes[70], "frame_640x480_q85": sizes[85],
            "agent_hour_mb_q70": round(sizes[70] * 3600 / 1e6, 1), "agent_hour_mb_q85": round(sizes[85] * 3600 / 1e6, 1),
            "retention": {"written": n, "quota": quota, "kept": kept["frames"], "kept_bytes": kept["bytes"],
                          "on_disk_bytes": on_disk, "write_ms_per_frame": round(write_s / n * 1000, 2)}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--beam", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--photo", type=Path)
    ap.add_argument("--skip-frames", action="store_true")
    a = ap.parse_args()
    import json

    print(json.dumps(speech(a.threads, a.beam, a.device), indent=1))
    if not a.skip_frames:
        print(json.dumps(frames(a.photo), indent=1))


if __name__ == "__main__":
    main()
