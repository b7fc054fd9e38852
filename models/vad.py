"""Streaming voice activity detection: audio in, utterances out.

Uses the Silero VAD ONNX model that faster-whisper ships (`faster_whisper.vad.get_vad_model`),
scored window by window (512 samples, 32 ms at 16 kHz) as audio arrives, with the same context
rule as faster-whisper's batch function (each window sees the last 64 samples of the previous
one), so a stream cut into chunks scores like the whole recording. An utterance ends after
`min_silence_ms` below the lower threshold, or is cut at `max_utterance_s` (Whisper reads at
most 30 s at once).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RATE = 16000
WINDOW = 512


@dataclass(frozen=True)
class Cut:
    """One utterance: absolute sample positions in the stream, padded, and its audio."""

    start: int
    end: int
    audio: np.ndarray


class Utterances:
    """Synchronous and stateful: one per audio stream. `feed` and `flush` return finished cuts."""

    def __init__(self, *, threshold: float = 0.5, min_silence_ms: int = 600, min_speech_ms: int = 250,
                 max_utterance_s: float = 20.0, pad_ms: int = 200, model=None):
        if model is None:
            from faster_whisper.vad import get_vad_model  # one ONNX session per process (lru_cache)

            model = get_vad_model()
        self.model = model
        self.threshold, self.low = threshold, max(threshold - 0.15, 0.01)
        self.min_silence, self.min_speech = min_silence_ms * RATE // 1000, min_speech_ms * RATE // 1000
        self.max_len, self.pad = int(max_utterance_s * RATE), pad_ms * RATE // 1000
        self.buf = np.zeros(0, dtype=np.float32)
        self.base = 0  # absolute position of buf[0]
        self.done = 0  # windows scored up to here
        self.speech_start: int | None = None
        self.speech_end = 0

    @property
    def end(self) -> int:
        return self.base + len(self.buf)

    @property
    def settled(self) -> int:
        """Audio before this position has been cut or found silent: nothing earlier will come out."""
        if self.speech_start is not None:
            return max(0, self.speech_start - self.pad)
        return max(0, self.done - self.pad)

    def feed(self, samples: np.ndarray) -> list[Cut]:
        self.buf = np.concatenate([self.buf, samples.astype(np.float32, copy=False)])
        n = (self.end - self.done) // WINDOW
        if n == 0:
            return []
        lo = self.done - self.base
        has_prev = lo >= WINDOW  # the previous window gives the first new one its context
        chunk = self.buf[lo - WINDOW if has_prev else lo: lo + n * WINDOW]
        # a copy: the model writes into its input (it zeroes the last window's tail as context)
        probs = np.asarray(self.model(chunk.copy())).reshape(-1)[1 if has_prev else 0:]
        cuts = []
        for k, p in enumerate(probs):
            w = self.done + k * WINDOW
            cuts += self._step(w, float(p))
        self.done += n * WINDOW
        self._trim()
        return cuts

    def _step(self, w: int, p: float) -> list[Cut]:
        if p >= self.threshold:
            if self.speech_start is None:
                self.speech_start = w
            self.speech_end = w + WINDOW
        if self.speech_start is None:
            return []
        if p < self.low and w + WINDOW - self.speech_end >= self.min_silence:
            return self._close(self.speech_end, ended=True)
        if w + WINDOW - self.speech_start >= self.max_len:  # too long for one Whisper pass: cut here
            return self._close(w + WINDOW, ended=False)
        return []

    def _close(self, end: int, *, ended: bool) -> list[Cut]:
        start, self.speech_start = self.speech_start, None if ended else end
        if end - start < self.min_speech:
            return []
        a, b = max(self.base, start - self.pad), min(self.end, end + (self.pad if ended else 0))
        return [Cut(a, b, self.buf[a - self.base: b - self.base].copy())]

    def flush(self) -> list[Cut]:
        """The stream ended (or jumped): the open utterance, if any, comes out; the state resets."""
        cuts = []
        if self.speech_start is not None:
            cuts = self._close(max(self.speech_end, self.done), ended=True)
        self.base = self.done = self.end
        self.buf, self.speech_start = np.zeros(0, dtype=np.float32), None
        return cuts

    def _trim(self) -> None:
        keep_from = (self.speech_start - self.pad) if self.speech_start is not None else \
            self.done - max(self.pad, WINDOW)
        drop = max(0, keep_from - self.base)
        if drop:
            self.buf = self.buf[drop:]
            self.base += drop
