"""Voice notes to text through an OpenAI-compatible `POST {base_url}/audio/transcriptions`.

OpenAI API reference, "Create transcription": a multipart/form-data body with `file` (the audio,
named with its extension) and `model`; the JSON answer's `text` is the transcript. Groq, a local
faster-whisper or whisper.cpp server answer the same request.
"""

from __future__ import annotations

import asyncio

import structlog

from agent.errors import MediaRefused

__all__ = ["Transcriber"]

log = structlog.get_logger(__name__)

_EXTENSIONS = {
    "audio/ogg": "ogg",
    "audio/mpeg": "mp3",
    "audio/wav": "wav",
    "audio/flac": "flac",
    "audio/mp4": "m4a",
    "audio/webm": "webm",
}
"""The server reads the format from the file name's extension (OpenAI lists these)."""
MAX_TRANSCRIPT_CHARS = 20_000


class Transcriber:
    """One transcription endpoint; failures become MediaRefused (one sentence, no retry)."""

    def __init__(self, base_url: str, *, model: str, api_key: str | None, timeout_s: float) -> None:
        self._url = base_url.rstrip("/") + "/audio/transcriptions"
        self._model = model
        self._api_key = api_key
        self._timeout_s = timeout_s

    async def transcribe(self, data: bytes, mime: str) -> str:
        """The words spoken in `data` (audio of type `mime`)."""
        import aiohttp  # a voice note's first transcription pays for it, not every start-up

        form = aiohttp.FormData()
        form.add_field("model", self._model)
        form.add_field(
            "file", data, filename=f"voice.{_EXTENSIONS.get(mime, 'ogg')}", content_type=mime
        )
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            async with asyncio.timeout(self._timeout_s), aiohttp.ClientSession() as session:
                async with session.post(self._url, data=form, headers=headers) as response:
                    if response.status != 200:
                        log.warning("transcription_failed", status=response.status)
                        raise MediaRefused(
                            "I could not transcribe that voice note (the transcription service "
                            f"answered {response.status}); please try again or type it"
                        )
                    body = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.warning("transcription_failed", error_type=type(exc).__name__)
            raise MediaRefused(
                "I could not transcribe that voice note (the transcription service did not "
                "answer); please try again or type it"
            ) from exc
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise MediaRefused("I could not transcribe that voice note; please type it instead")
        return text.strip()[:MAX_TRANSCRIPT_CHARS]
