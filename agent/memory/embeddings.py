"""Vectors for memory search: an OpenAI-compatible `/v1/embeddings` client, and the pure maths.

`OpenAIEmbedder` calls any server that speaks the OpenAI embeddings API (`memory.embeddings`),
through the `openai` SDK (imported only when one is configured), with a deadline; it asks for
`encoding_format: "float"`. The store keeps and compares the vectors (`state.memory`). A failure
is `EmbeddingsUnavailable`: memory then searches by full text alone, and nothing is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from agent.errors import HermesError
from agent.providers.tls import sdk_ssl_context

__all__ = ["Embedder", "EmbeddingsUnavailable", "OpenAIEmbedder"]

log = structlog.get_logger(__name__)

MAX_INPUT_CHARS = 8_000
"""Text beyond this is not embedded (a note is short; a query is one message)."""


class EmbeddingsUnavailable(HermesError):
    """The embeddings endpoint failed or answered nonsense; search falls back to full text."""


class Embedder(Protocol):
    """Turns texts into vectors (one per text, in order)."""

    @property
    def model(self) -> str: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def aclose(self) -> None: ...


class OpenAIEmbedder:
    """`Embedder` over an OpenAI-compatible `/v1/embeddings` endpoint."""

    def __init__(self, *, base_url: str, api_key: str, model: str, timeout_s: float) -> None:
        import openai

        self._model = model
        self._timeout_s = timeout_s
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(timeout=timeout_s, verify=sdk_ssl_context()),
        )

    @property
    def model(self) -> str:
        return self._model

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import openai

        inputs = [t[:MAX_INPUT_CHARS] or " " for t in texts]
        try:
            async with asyncio.timeout(self._timeout_s):
                reply: Any = await self._client.embeddings.create(
                    model=self._model, input=inputs, encoding_format="float"
                )
        except (openai.OpenAIError, TimeoutError) as exc:
            log.warning("embeddings_failed", model=self._model, error_type=type(exc).__name__)
            raise EmbeddingsUnavailable(f"embeddings failed: {type(exc).__name__}") from exc
        data = sorted(reply.data, key=lambda d: d.index)
        vectors = [list(d.embedding) for d in data]
        if len(vectors) != len(inputs) or any(not v for v in vectors):
            raise EmbeddingsUnavailable("embeddings: the server returned the wrong number")
        return vectors

    async def aclose(self) -> None:
        await self._client.close()
