"""The `media` section of config.yaml: photos, voice notes and files (docs/media.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MediaConfig", "TranscriptionConfig"]


class TranscriptionConfig(BaseModel):
    """Voice notes to text through any OpenAI-compatible `/v1/audio/transcriptions` (OpenAI,
    Groq, a local faster-whisper or whisper.cpp server). No `base_url`: voice is not transcribed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    model: str = "whisper-1"
    api_key_env: str | None = "OPENAI_API_KEY"
    """The environment variable holding the key (None: no key, for a local server)."""
    timeout_s: float = Field(default=60.0, gt=0)


class MediaConfig(BaseModel):
    """Photos, voice notes and files (docs/media.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transcription: TranscriptionConfig = TranscriptionConfig()
    max_document_chars: int = Field(default=40_000, gt=0)
    """A document's text up to this many characters goes into the message; a longer one is
    stored and the model is told where to read it."""
    fetch_timeout_s: float = Field(default=20.0, gt=0)
    """Downloading one file (a platform's file server, an https image URL)."""
