"""Settings of the local models, owned here and composed by `daemon.settings`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LlmSettings(BaseModel):
    """The local LLM: a bundled profile or any GGUF file, and how to run it."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("tiny", description="'tiny' (SmolLM2-135M), 'small' (Qwen2.5-Coder-1.5B) or a GGUF path.")
    n_ctx: int = Field(8192, ge=512, le=262144, description="Context window in tokens.")
    n_threads: int | None = Field(None, ge=1, le=512, description="CPU threads (default: all cores).")
    n_gpu_layers: int = Field(0, ge=-1, description="Layers offloaded to a GPU; -1 offloads all.")
    seed: int = Field(0, description="Sampling seed; with temperature 0 answers repeat exactly.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature.")
    time_limit_s: float = Field(180.0, gt=0, description="A generation longer than this is stopped.")
    chat_format: str | None = Field(None, description="llama.cpp chat format; default: the GGUF's own template.")
