"""Settings of consolidation and answering, owned here and composed by `daemon.settings`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ConsolidationSettings(BaseModel):
    """How 10-minute windows become shared-memory events."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = Field(2500, ge=200, description="Observation tokens handed to the model per window.")
    max_events: int = Field(6, ge=1, le=20, description="Most events written for one window.")
    output_tokens: int = Field(700, ge=64, description="Most tokens the model may write per window.")


class AnswerSettings(BaseModel):
    """EgoMAS question answering: shared memory, planner, per-agent retrieval, responder."""

    model_config = ConfigDict(extra="forbid")

    shared_top_n: int = Field(20, ge=0, le=200, description="Events retrieved from shared memory (BM25).")
    agent_top_k: int = Field(5, ge=1, le=50, description="Fine units kept per planned agent request.")
    score_threshold: float = Field(10.0, ge=0, description="Per-agent BM25 score below which a unit is dropped.")
    keep_best: bool = Field(
        True, description="Keep an agent's best unit even under the threshold (false: EgoMAS exactly)."
    )
    retrieve_top_k: int = Field(100, ge=1, description="Candidates searched before filtering to one agent.")
    fallback_top_k: int = Field(1000, ge=1, description="Candidates searched when the first pass finds too few.")
    planner: Literal["llm", "rule"] = Field("llm", description="Who picks agents and sub-queries.")
    max_requests: int = Field(6, ge=1, le=20, description="Most agent requests a plan may make.")
    context_tokens: int = Field(4600, ge=256, description="Token budget of the context handed to the responder.")
    answer_tokens: int = Field(160, ge=16, description="Most tokens of an open answer.")
