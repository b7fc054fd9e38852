"""Settings of the local models, owned here and composed by `daemon.settings`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LlmSettings(BaseModel):
    """The local LLM: a bundled profile or any GGUF file, and how to run it."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("base", description="'base' (Qwen2.5-Coder-0.5B: reads Chinese and English), 'tiny' (SmolLM2-135M, "
                       "English only), 'small' (Qwen2.5-Coder-1.5B) or a GGUF path.")
    consolidation_model: str | None = Field(
        None, description="The model that writes the shared memory, when another than `model` (which answers and "
        "plans): a profile or a GGUF path; None: the same one instance.")
    n_ctx: int = Field(8192, ge=512, le=262144, description="Context window in tokens.")
    n_threads: int | None = Field(None, ge=1, le=512, description="CPU threads (default: all cores).")
    n_gpu_layers: int = Field(0, ge=-1, description="Layers offloaded to a GPU; -1 offloads all.")
    flash_attn: bool = Field(True, description="llama.cpp's fused attention (reads a prompt about 6% faster on 2 "
                             "CPU cores; off: the plain attention).")
    seed: int = Field(0, description="Sampling seed; with temperature 0 answers repeat exactly.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature.")
    time_limit_s: float = Field(180.0, gt=0, description="A generation longer than this is stopped.")
    chat_format: str | None = Field(None, description="llama.cpp chat format; default: the GGUF's own template.")


class SpeechSettings(BaseModel):
    """Speech to transcripts: voice activity detection (Silero) and faster-whisper."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Transcribe agents/{agent}/audio; off: audio is answered 'unsupported'.")
    model: str = Field("tiny.en", description="'tiny.en' (bundled) or a folder with a CTranslate2 Whisper model.")
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda)$", description="auto: a CUDA GPU when there is one.")
    compute_type: str = Field("default", description="CTranslate2 compute type; default: int8 on CPU, float16 on GPU.")
    threads: int = Field(0, ge=0, le=512, description="CPU threads of the recogniser (0: CTranslate2's default).")
    workers: int = Field(1, ge=1, le=64, description="Utterances recognised at once (each on `threads` cores).")
    language: str | None = Field("en", description="Language of a multilingual model; None detects it.")
    beam_size: int = Field(1, ge=1, le=10, description="Beam search width (1: greedy, the fastest).")
    vad_threshold: float = Field(0.5, gt=0, lt=1, description="Speech probability that starts an utterance.")
    min_silence_ms: int = Field(600, ge=100, description="Silence that ends an utterance.")
    pad_ms: int = Field(200, ge=0, le=2000, description="Audio kept before and after each utterance.")
    max_utterance_s: float = Field(20.0, ge=2, le=30, description="Longer speech is cut here.")
    gap_fill_ms: int = Field(1000, ge=0, description="Lost audio up to this long is filled with silence; a longer "
                                                     "gap ends the utterance.")
    backlog_s: float = Field(300.0, gt=0, description="Speech waiting for recognition (all agents) before the "
                                                      "oldest is dropped and reported.")
    queue_mb: float = Field(16.0, gt=0, description="Audio waiting for voice detection before drops (16 MB: "
                                                    "8 minutes of one stream).")
    idle_flush_s: float = Field(2.0, gt=0, description="An agent's audio silent this long (wall clock): its open "
                                                       "utterance is cut and transcribed.")
    max_chunk_bytes: int = Field(320_000, ge=1024, description="Larger audio messages (10 s) are rejected.")


class VisionSettings(BaseModel):
    """Optional vision models, by path: an image-text embedder and a frame captioner."""

    model_config = ConfigDict(extra="forbid")

    embedder: str | None = Field(None, description="Folder of an ONNX CLIP/SigLIP export: vision_model.onnx, "
                                                   "text_model.onnx, tokenizer.json (preprocessor_config.json).")
    captioner: str | None = Field(None, description="A multimodal GGUF (llama-cpp-python) that captions frames.")
    projector: str | None = Field(None, description="The captioner's projector (mmproj) GGUF.")
    chat_handler: str = Field("llava15", description="llama-cpp-python chat handler of the captioner: llava15, "
                                                     "llava16, moondream, nanollava, minicpmv26, qwen25vl.")
    caption_every_s: float = Field(60.0, gt=0, description="Caption at most one frame per agent per this period.")
    caption_prompt: str = Field("Describe what the camera wearer sees and does, in one sentence.",
                                description="Instruction given with each frame.")
    threads: int | None = Field(None, ge=1, le=512, description="CPU threads of the vision models.")
    n_gpu_layers: int = Field(0, ge=-1, description="Captioner layers offloaded to a GPU; -1 offloads all.")
