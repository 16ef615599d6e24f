"""Config section for what Hermes remembers about people (`memory`, docs/memory.md).

Validated at the door like the rest of `config.yaml` (pydantic, unknown keys refused). Nothing
here reads the environment: an embeddings key is named by its variable (`api_key_env`) and
looked up in the environ `run_agent` passes down.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_NOTES_AT_START",
    "DEFAULT_PROFILE_MAX_TOKENS",
    "EmbeddingsConfig",
    "MemoryConfig",
]

DEFAULT_PROFILE_MAX_TOKENS = 1_500
DEFAULT_NOTES_AT_START = 3


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbeddingsConfig(_Section):
    """An OpenAI-compatible embeddings endpoint: memory search becomes hybrid (docs/memory.md)."""

    base_url: str
    """The API root, e.g. http://127.0.0.1:11434/v1 (Ollama) or https://api.openai.com/v1."""
    model: str
    api_key: str | None = None
    api_key_env: str | None = None
    """The environment variable holding the key, instead of `api_key`."""
    timeout_s: float = Field(default=10.0, gt=0)


class MemoryConfig(_Section):
    """What Hermes remembers about each person across conversations (docs/memory.md)."""

    enabled: bool = True
    """Profile in the system message at session start and compaction, notes, the memory tool,
    `/memory` and `/forget`; false: none of it (what is stored stays stored)."""
    profile_max_tokens: int = Field(default=DEFAULT_PROFILE_MAX_TOKENS, ge=100, le=8_000)
    """The profile's cap (estimated tokens): a full profile takes no entry until one goes."""
    notes_at_start: int = Field(default=DEFAULT_NOTES_AT_START, ge=0, le=20)
    """Notes matching a new session's first message offered with the profile."""
    from_compaction: bool = True
    """The compaction summary call also lists facts about the user, kept as notes."""
    embeddings: EmbeddingsConfig | None = None
    """Set: notes also get vectors and search is hybrid (full text + vectors); unset: full
    text only."""
