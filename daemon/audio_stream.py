"""One agent's audio, synchronously: chunks placed in stream time by their capture time and
sequence number (lost chunks filled with silence up to `gap_fill_ms`; a longer gap, a restart or a
duplicate handled), cut into utterances by the VAD, and Whisper's lines of an utterance made into
transcript observations. The live worker (`daemon/audio_worker.py`) and `chorus transcribe` both
hear through this module; it knows nothing of asyncio."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memory.records import Observation
from models.config import SpeechSettings
from models.speech import RATE, Transcriber
from models.vad import Utterances
from streams.messages import MediaHeader

JITTER_MS = 250  # capture-time noise tolerated between consecutive chunks


@dataclass
class Utterance:
    agent: str
    start_ms: int
    end_ms: int
    audio: np.ndarray

    @property
    def seconds(self) -> float:
        return len(self.audio) / RATE


class AgentAudio:
    """One agent's stream: its VAD state and the map from sample positions to capture time."""

    def __init__(self, agent: str, ts: int, s: SpeechSettings):
        self.agent, self.s = agent, s
        self.gate = Utterances(threshold=s.vad_threshold, min_silence_ms=s.min_silence_ms, pad_ms=s.pad_ms,
                               max_utterance_s=s.max_utterance_s)
        self.anchor_ms, self.anchor_pos, self.last_seq = ts, 0, -1

    def ms(self, pos: int) -> int:
        return self.anchor_ms + (pos - self.anchor_pos) * 1000 // RATE

    def utterances(self, cuts) -> list[Utterance]:
        return [Utterance(self.agent, self.ms(c.start), self.ms(c.end), c.audio) for c in cuts]

    def take(self, h: MediaHeader, samples: np.ndarray) -> tuple[list[Utterance], str | None]:
        """Place one chunk in the stream; (finished utterances, what was odd about it or None)."""
        expected = self.ms(self.gate.end)
        gap = h.ts - expected
        if h.seq <= self.last_seq and gap <= JITTER_MS:
            return [], "late"  # a duplicate or out of order: its place in the stream is taken
        note, out = None, []
        lost = h.seq > self.last_seq + 1 and self.last_seq >= 0  # chunks in between never came
        if (lost and gap > 0) or gap > JITTER_MS:
            if gap <= self.s.gap_fill_ms:  # lost audio: silence in its place keeps the stream's time
                out += self.utterances(self.gate.feed(np.zeros(gap * RATE // 1000, dtype=np.float32)))
                note = "gap"
            else:
                note = "jump"
        elif gap < -JITTER_MS:
            if lost or gap < -self.s.gap_fill_ms:
                note = "jump"
            else:  # the agent's clock and its sample count disagree: trust the clock
                self.anchor_ms, self.anchor_pos = h.ts, self.gate.end
        if note == "jump":  # a long gap, or the agent restarted: the open utterance ends with its audio
            out += self.utterances(self.gate.flush())
            self.anchor_ms, self.anchor_pos = h.ts, self.gate.end
        self.last_seq = h.seq
        out += self.utterances(self.gate.feed(samples))
        return out, note

    def flush(self) -> list[Utterance]:
        """The open utterance, cut where the audio ends (the agent went quiet, or the recording ended)."""
        return self.utterances(self.gate.flush())

    def settled_ms(self) -> int:
        return self.ms(self.gate.settled)


def load_transcriber(s: SpeechSettings, workers: int = 1) -> Transcriber:
    """Whisper as the settings name it (the bundled model resolved to its folder)."""
    from models.bundled import resolve_whisper

    return Transcriber(resolve_whisper(s.model), device=s.device, compute_type=s.compute_type, threads=s.threads,
                       workers=workers, language=s.language, beam_size=s.beam_size)


def observations(u: Utterance, heard) -> list[Observation]:
    """Whisper's lines of one utterance as transcripts, placed in capture time and kept inside the
    utterance (Whisper's times may run past the audio it was given)."""
    obs = []
    for i, line in enumerate(heard.lines):
        start = min(u.start_ms + int(line.start_s * 1000), u.end_ms)
        end = max(start, min(u.start_ms + int(line.end_s * 1000), u.end_ms))
        obs.append(Observation(agent=u.agent, kind="transcript", start_ms=start, end_ms=end, text=line.text,
                               lang=heard.language, ext_id=f"asr-{u.start_ms}-{i}"))
    return obs


def hear_recording(agent: str, start_ms: int, audio: np.ndarray, s: SpeechSettings,
                   model: Transcriber) -> tuple[list[Utterance], list[Observation], float]:
    """A whole recording (float32 mono at 16 kHz, its first sample captured at `start_ms`) as the
    daemon would hear it live: (utterances, transcripts, seconds spent recognising)."""
    stream = AgentAudio(agent, start_ms, s)
    said = [u for i in range(0, len(audio), RATE) for u in stream.utterances(stream.gate.feed(audio[i:i + RATE]))]
    said += stream.flush()
    obs, seconds = [], 0.0
    for u in said:
        heard = model.transcribe(u.audio)
        seconds += heard.seconds
        obs += observations(u, heard)
    return said, obs, seconds
