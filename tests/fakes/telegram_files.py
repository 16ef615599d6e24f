"""The file side of the fake Bot API: `getFile` and the file download URL, as strict as the real.

https://core.telegram.org/bots/api#getfile: `getFile(file_id)` returns a File (`file_id`,
`file_unique_id`, `file_size`, `file_path`); the bytes are then at
`<file server>/file/bot<token>/<file_path>`. "For the moment, bots can download files of up to
20MB in size": a bigger file's getFile is the 400 "Bad Request: file is too big", an unknown id
is the 400 "Bad Request: invalid file_id". Incoming messages carry the file's objects: `photo`
(an array of PhotoSize, smallest first: file_id, file_unique_id, width, height, file_size),
`document` (file_name, mime_type, file_size), `voice` (duration, mime_type, file_size), `audio`,
and a `caption` instead of `text`.

The bot sends files with `sendPhoto` / `sendDocument` (multipart upload; a caption of at most
1024 characters; a photo of at most 10 MB, a document of at most 50 MB): `received` records them.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

__all__ = ["BOT_API_DOWNLOAD_LIMIT", "FakeBotFiles", "ReceivedFile", "media_message"]

BOT_API_DOWNLOAD_LIMIT = 20 * 1024 * 1024


UPLOAD_LIMITS = {"photo": 10 * 1024 * 1024, "document": 50 * 1024 * 1024}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceivedFile:
    """One file the bot sent."""

    kind: str
    chat_id: int
    filename: str
    data: bytes
    caption: str | None


@dataclass(slots=True)
class _File:
    file_id: str
    unique_id: str
    size: int
    data: bytes | None
    """None: a file announced with a size only (too big to be worth holding)."""
    path: str


class FakeBotFiles:
    """Files people sent, by file_id; `downloads` records every file path served."""

    def __init__(self, token: str) -> None:
        self._token = token
        self._files: dict[str, _File] = {}
        self._by_path: dict[str, _File] = {}
        self._ids = itertools.count(1)
        self.downloads: list[str] = []
        self.get_file_calls: list[str] = []
        self.received: list[ReceivedFile] = []

    def add(
        self, data: bytes | None, *, size: int | None = None, folder: str = "documents"
    ) -> dict[str, Any]:
        """Hold a file; returns its `file_id`, `file_unique_id`, `file_size` fields."""
        n = next(self._ids)
        ext = {"photos": "jpg", "voice": "oga", "music": "mp3"}.get(folder, "bin")
        file = _File(
            file_id=f"FILE-{n}-AgADBAAD",
            unique_id=f"UQ{n}",
            size=len(data) if data is not None else int(size or 0),
            data=data,
            path=f"{folder}/file_{n}.{ext}",
        )
        self._files[file.file_id] = file
        self._by_path[file.path] = file
        return {"file_id": file.file_id, "file_unique_id": file.unique_id, "file_size": file.size}

    async def get_file(self, params: dict[str, Any]) -> web.Response:
        file_id = str(params.get("file_id", ""))
        self.get_file_calls.append(file_id)
        file = self._files.get(file_id)
        if file is None:
            return _bad_request("Bad Request: invalid file_id")
        if file.size > BOT_API_DOWNLOAD_LIMIT:
            return _bad_request("Bad Request: file is too big")
        result = {
            "file_id": file.file_id,
            "file_unique_id": file.unique_id,
            "file_size": file.size,
            "file_path": file.path,
        }
        return web.json_response({"ok": True, "result": result})

    async def receive(self, fake: Any, kind: str, params: dict[str, Any]) -> web.Response:
        """sendPhoto / sendDocument: the upload checked as the Bot API does, then recorded."""
        chat_id = int(params.get("chat_id", 0))
        upload = params.get(kind)
        if chat_id not in fake._state.chats:
            return _bad_request("Bad Request: chat not found")
        if not isinstance(upload, dict) or not upload.get("data"):
            return _bad_request(f"Bad Request: there is no {kind} in the request")
        if len(upload["data"]) > UPLOAD_LIMITS[kind]:
            return _bad_request("Bad Request: file is too big")
        caption = params.get("caption")
        if caption is not None and len(str(caption)) > 1024:
            return _bad_request("Bad Request: message caption is too long")
        self.received.append(
            ReceivedFile(
                kind=kind,
                chat_id=chat_id,
                filename=str(upload.get("filename") or ""),
                data=upload["data"],
                caption=caption,
            )
        )
        stored = self.add(upload["data"], folder="photos" if kind == "photo" else "documents")
        message: dict[str, Any] = {
            "message_id": next(fake._message_ids),
            "date": 0,
            "chat": fake._state.chats[chat_id],
            "from": fake._bot_user(),
        }
        if kind == "photo":
            message["photo"] = [{**stored, "width": 1, "height": 1}]
        else:
            message["document"] = {**stored, "file_name": upload.get("filename")}
        if caption is not None:
            message["caption"] = caption
        return web.json_response({"ok": True, "result": message})

    async def download(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self._token:
            return web.json_response(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401
            )
        file = self._by_path.get(request.match_info["file_path"])
        if file is None or file.data is None:
            return web.json_response(
                {"ok": False, "error_code": 404, "description": "Not Found"}, status=404
            )
        self.downloads.append(file.path)
        return web.Response(body=file.data, content_type="application/octet-stream")


def media_message(
    message_id: int,
    chat: dict[str, Any],
    user_id: int,
    caption: str | None,
    media: dict[str, Any],
) -> dict[str, Any]:
    """A person's message carrying files (and a caption, never `text`)."""
    message: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": chat,
        "from": {"id": user_id, "is_bot": False, "first_name": "Alice", "username": "alice"},
        **media,
    }
    if caption is not None:
        message["caption"] = caption
    return message


def _bad_request(description: str) -> web.Response:
    return web.json_response(
        {"ok": False, "error_code": 400, "description": description}, status=400
    )
