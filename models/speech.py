"""Speech to text: faster-whisper (CTranslate2) behind a small synchronous class.

The daemon cuts utterances with the streaming VAD (`models.vad`) and hands each one here, so the
model never sees silence and its own VAD stays off. One instance per process; one call at a time
(CTranslate2 runs up to `workers` calls at once, each on `threads` cores: a box with many cores
recognises several agents' utterances side by side; on 2 cores one worker does as well as two).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.errors import ModelError

logger = logging.getLogger(__name__)
RATE = 16000


@dataclass(frozen=True)
class Line:
    """One recognised segment, times in seconds from the start of the audio handed in."""

    start_s: float
    end_s: float
    text: str
    no_speech_prob: float
    avg_logprob: float


@dataclass(frozen=True)
class Heard:
    lines: list[Line]
    language: str
    audio_s: float
    seconds: float  # compute time


class Transcriber:
    """A loaded Whisper model. Synchronous; async callers move calls off the event loop."""

    def __init__(self, path: str | Path, *, device: str = "auto", compute_type: str = "default",
                 threads: int = 0, workers: int = 1, language: str | None = "en", beam_size: int = 1,
                 no_speech_threshold: float = 0.6):
        from faster_whisper import WhisperModel  # heavy: imported only when speech is used

        device = _device(device)
        if compute_type == "default":  # int8 on a CPU, float16 on a GPU
            compute_type = "float16" if device == "cuda" else "int8"
        t0 = time.perf_counter()
        try:
            self.model = WhisperModel(str(path), device=device, compute_type=compute_type, cpu_threads=threads,
                                      num_workers=workers, local_files_only=True)
        except (RuntimeError, ValueError, OSError) as e:
            raise ModelError(f"cannot load the Whisper model at {path}: {e}") from e
        self.name = Path(path).name if Path(path).name != "model" else Path(path).parent.parent.name
        self.device, self.compute_type = device, compute_type
        self.language = None if not self.model.model.is_multilingual else language
        self.beam_size, self.no_speech_threshold = beam_size, no_speech_threshold
        logger.info("speech model %s loaded on %s (%s) in %.1fs", path, device, compute_type,
                    time.perf_counter() - t0)

    def transcribe(self, audio: np.ndarray) -> Heard:
        """`audio`: float32 mono at 16 kHz in [-1, 1]."""
        t0 = time.perf_counter()
        segments, info = self.model.transcribe(  # thread-safe: CTranslate2 queues calls on its workers
            audio, language=self.language, beam_size=self.beam_size, vad_filter=False,
            # an utterance stands alone: conditioning on earlier text only spreads a mistake
            condition_on_previous_text=False, no_speech_threshold=self.no_speech_threshold,
        )
        lines = [Line(s.start, s.end, s.text.strip(), s.no_speech_prob, s.avg_logprob) for s in segments]
        # Whisper's known failure on noise: a confident-sounding line where there was no speech
        kept = [x for x in lines if x.text and not (x.no_speech_prob > self.no_speech_threshold
                                                   and x.avg_logprob < -1.0)]
        return Heard(kept, info.language or "en", len(audio) / RATE, time.perf_counter() - t0)


def _device(device: str) -> str:
    if device != "auto":
        return device
    try:
        import ctranslate2

        return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    except Exception:  # a wheel without CUDA support answers with an error, not 0
        return "cpu"


def pcm16_to_float(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
