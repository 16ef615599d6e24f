"""A strict fake of the OpenAI embeddings API (`POST /v1/embeddings`) on 127.0.0.1.

Contract (https://platform.openai.com/docs/api-reference/embeddings/create): a Bearer key is
required (401 otherwise); the body has `model` (string) and `input` (a non-empty string or a
non-empty array of non-empty strings), optionally `encoding_format` ("float" or "base64"),
`dimensions` and `user`; anything else is a 400 `invalid_request_error`. The reply is
`{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...]}, ...],
"model": ..., "usage": {"prompt_tokens": n, "total_tokens": n}}`.

The vectors stand in for a real model's: character trigrams of each word hashed into
`DIMENSIONS` buckets, so texts sharing word stems ("peanut", "peanuts") are close even where
full-text search (whole words, no stemming) finds nothing. `down` makes it answer 503.
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
from typing import Any, Self

from aiohttp import web

__all__ = ["DIMENSIONS", "FakeEmbeddings", "trigram_vector"]

DIMENSIONS = 256
_ALLOWED = frozenset({"model", "input", "encoding_format", "dimensions", "user"})
_WORD = re.compile(r"\w+")


def trigram_vector(text: str) -> list[float]:
    """The fake model's embedding of `text`."""
    vector = [0.0] * DIMENSIONS
    for word in _WORD.findall(text.lower()):
        padded = f"#{word}#"
        for i in range(len(padded) - 2):
            digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "little") % DIMENSIONS] += 1.0
    return vector


class FakeEmbeddings:
    """`async with FakeEmbeddings() as fake:` then point a client at `fake.base_url`."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.down = False
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _embeddings(self, request: web.Request) -> web.Response:
        if not request.headers.get("Authorization", "").startswith("Bearer "):
            return _error(401, "You didn't provide an API key.", "invalid_api_key")
        if self.down:
            return _error(503, "The server is overloaded.", "server_error")
        body = await request.json()
        self.requests.append(body)
        problem = _invalid(body)
        if problem:
            return _error(400, problem, "invalid_request_error")
        inputs = [body["input"]] if isinstance(body["input"], str) else body["input"]
        b64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(inputs):
            vector = trigram_vector(text)
            encoded: Any = (
                base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
                if b64
                else vector
            )
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(len(t) // 4 + 1 for t in inputs)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )


def _invalid(body: Any) -> str:
    if not isinstance(body, dict):
        return "The body must be a JSON object."
    unknown = set(body) - _ALLOWED
    if unknown:
        return f"Unrecognized request argument supplied: {sorted(unknown)[0]}"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    value = body.get("input")
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        return "'input' is a required property"
    if not all(isinstance(i, str) and i for i in items):
        return "'$.input' is invalid. Please check the API reference."
    if body.get("encoding_format", "float") not in ("float", "base64"):
        return "encoding_format must be float or base64"
    return ""


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}, status=status
    )
