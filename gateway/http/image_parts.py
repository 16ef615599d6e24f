"""A request's images, taken: `image_url` parts (Chat Completions) and `input_image` parts
(Responses) are decoded (data URLs) or fetched (https URLs), stored for the caller's owner and
replaced by references (`_media`), so no bytes reach the transcript or the store's rows.

OpenAI API reference: a Chat Completions user message's content part
`{"type": "image_url", "image_url": {"url", "detail"}}`; a Responses input item's
`{"type": "input_image", "image_url", "detail"}` (a `file_id` needs OpenAI's Files API: a 400).
An https image is fetched with a size cap and a deadline, never from a private, loopback or
link-local address (checked on every resolution, redirects included, so a name that turns
private between the check and the connection cannot reach the inside of the network).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import socket
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from agent.errors import MediaRefused
from agent.media import MediaRef, with_media
from agent.media.sniff import MAX_IMAGE_BYTES
from gateway.http.error_envelope import ApiError
from gateway.media_intake import ref_of, store_checked
from gateway.platforms.base import InboundFile
from state import MediaStore

__all__ = [
    "MAX_REDIRECTS",
    "decode_data_url",
    "has_images",
    "is_public_address",
    "take_images",
]

MAX_REDIRECTS = 3


def is_public_address(address: str) -> bool:
    """Whether an image may be fetched from `address`: a global unicast address only."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def decode_data_url(url: str) -> bytes:
    """The bytes of a `data:[<type>];base64,<data>` URL; raises MediaRefused (413 when the
    image is over the limit, judged before decoding)."""
    header, comma, payload = url.partition(",")
    if not comma or not header.endswith(";base64"):
        raise MediaRefused("an image data URL must be data:<type>;base64,<data>")
    if len(payload) * 3 // 4 > MAX_IMAGE_BYTES:
        raise MediaRefused(
            f"the image is {len(payload) * 3 / 4 / 1_048_576:.1f} MB; "
            f"images may be at most {MAX_IMAGE_BYTES // 1_048_576} MB",
            status=413,
        )
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MediaRefused("the image data URL is not valid base64") from exc


async def take_images(
    messages: Sequence[dict[str, Any]],
    *,
    media: MediaStore | None,
    owner: str,
    fetch_timeout_s: float,
    where: str = "messages",
) -> list[dict[str, Any]]:
    """`messages` with their image parts stored for `owner` and replaced by `_media`
    references; raises ApiError (413 too large, 400 otherwise) naming the part at fault."""
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list) or not any(_is_image(p) for p in content):
            out.append(dict(message))
            continue
        kept: list[Any] = []
        refs: list[MediaRef] = []
        for part_index, part in enumerate(content):
            if not _is_image(part):
                kept.append(part)
                continue
            at = f"{where}[{index}].content[{part_index}]"
            if media is None:
                raise ApiError(400, "this server does not take images", param=at)
            try:
                data = await _image_bytes(_url_of(part), fetch_timeout_s)
                file = InboundFile(origin="photo", data=data)
                stored = await store_checked(media, owner, file)
            except MediaRefused as exc:
                raise ApiError(exc.status, str(exc), "invalid_request_error", param=at) from None
            if stored.kind != "image":
                raise ApiError(400, f"{at} is not an image (it is {stored.mime})", param=at)
            refs.append(ref_of(stored, "photo"))
        msg: dict[str, Any] = {**message, "content": kept}
        out.append(dict(with_media(msg, [*_refs(message), *refs])))  # type: ignore[arg-type]
    return out


def has_images(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether any message carries an image part (most requests do not: nothing to take)."""
    return any(
        isinstance(m.get("content"), list) and any(_is_image(p) for p in m["content"])
        for m in messages
    )


def _is_image(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") in ("image_url", "input_image")


def _url_of(part: dict[str, Any]) -> str:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url.startswith(("data:", "https://")):
        if part.get("file_id"):
            raise MediaRefused("images by file_id are not supported; send a data: or https URL")
        raise MediaRefused("an image must be a data: URL or an https:// URL")
    return url


def _refs(message: dict[str, Any]) -> list[MediaRef]:
    from agent.media import media_of

    return media_of(message)


async def _image_bytes(url: str, timeout_s: float) -> bytes:
    if url.startswith("data:"):
        return decode_data_url(url)
    return await _fetch(url, timeout_s)


class _PublicOnly(AbstractResolver):
    """Resolves like the system, and refuses a name with any non-public address."""

    def __init__(self) -> None:
        self._inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        if not found or not all(is_public_address(r["host"]) for r in found):
            raise MediaRefused(f"the image URL's host {host!r} is not a public address")
        return found

    async def close(self) -> None:
        await self._inner.close()


async def _fetch(url: str, timeout_s: float) -> bytes:
    host = urlsplit(url).hostname or ""
    try:  # a literal address is checked here: the resolver is not asked for one
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None and not is_public_address(str(literal)):
        raise MediaRefused(f"the image URL's host {host!r} is not a public address")
    connector = aiohttp.TCPConnector(resolver=_PublicOnly())
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            async with session.get(url, max_redirects=MAX_REDIRECTS) as response:
                if response.status != 200:
                    raise MediaRefused(f"fetching the image answered HTTP {response.status}")
                declared = response.content_length
                if declared is not None and declared > MAX_IMAGE_BYTES:
                    raise MediaRefused(_too_big(declared), status=413)
                data = bytearray()
                async for chunk in response.content.iter_chunked(65536):
                    data += chunk
                    if len(data) > MAX_IMAGE_BYTES:  # a server that lied about its length
                        raise MediaRefused(_too_big(len(data)), status=413)
                return bytes(data)
    except (aiohttp.ClientError, TimeoutError) as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, MediaRefused) else None
        if cause is not None:
            raise cause from None
        raise MediaRefused(f"the image could not be fetched ({type(exc).__name__})") from exc


def _too_big(size: int) -> str:
    return (
        f"the image is {size / 1_048_576:.1f} MB; images may be at most "
        f"{MAX_IMAGE_BYTES // 1_048_576} MB"
    )
