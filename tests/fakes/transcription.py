"""FakeTranscription: a loopback OpenAI-compatible `POST /v1/audio/transcriptions`.

OpenAI API reference, "Create transcription": multipart/form-data with `file` (the audio file
object, its format read from the file name's extension: flac, mp3, mp4, mpeg, mpga, m4a, ogg,
wav, webm) and `model` (required), optional `language`, `prompt`, `response_format`,
`temperature`; the JSON answer is `{"text": ...}`. Errors use the usual envelope
`{"error": {"message", "type", "param", "code"}}`; a missing or wrong bearer key is a 401.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from aiohttp import web

__all__ = ["FakeTranscription", "Transcribed"]

FORMATS = ("flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "oga", "wav", "webm")
OPTIONAL = ("language", "prompt", "response_format", "temperature")


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcribed:
    model: str
    filename: str
    data: bytes


class FakeTranscription:
    """Answers every valid request with `text`; records what it got in `calls`."""

    def __init__(
        self, *, text: str = "remind me to water the plants", key: str | None = "sk-t"
    ) -> None:
        self.text = text
        self.key = key
        self.calls: list[Transcribed] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=25 * 1024 * 1024)  # the API's own file limit
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _transcribe(self, request: web.Request) -> web.Response:
        if self.key is not None and request.headers.get("Authorization") != f"Bearer {self.key}":
            return _error(401, "Incorrect API key provided", "invalid_request_error", None)
        if not request.content_type.startswith("multipart/form-data"):
            return _error(400, "Expected multipart/form-data", "invalid_request_error", None)
        fields: dict[str, Any] = {}
        filename = ""
        reader = await request.multipart()
        async for part in reader:
            if part.name == "file":  # type: ignore[union-attr]
                filename = part.filename or ""  # type: ignore[union-attr]
                fields["file"] = await part.read()  # type: ignore[union-attr]
            elif part.name in ("model", *OPTIONAL):  # type: ignore[union-attr]
                fields[str(part.name)] = await part.text()  # type: ignore[union-attr]
            else:
                return _error(
                    400,
                    f"Unrecognized request argument supplied: {part.name}",
                    "invalid_request_error",
                    part.name,
                )  # type: ignore[union-attr]
        if "model" not in fields:
            return _error(
                400, "you must provide a model parameter", "invalid_request_error", "model"
            )
        if "file" not in fields:
            return _error(400, "you must provide a file parameter", "invalid_request_error", "file")
        if filename.rsplit(".", 1)[-1].lower() not in FORMATS:
            return _error(
                400,
                f"Invalid file format. Supported formats: {list(FORMATS)}",
                "invalid_request_error",
                "file",
            )
        self.calls.append(
            Transcribed(model=fields["model"], filename=filename, data=fields["file"])
        )
        return web.json_response({"text": self.text})


def _error(status: int, message: str, kind: str, param: str | None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return web.json_response(body, status=status)
