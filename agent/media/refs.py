"""A message's media references: the `_media` metadata key of a canonical message.

A reference names a stored file by its sha256 and its owner (`Principal.owner`); it never holds
the bytes. The store keeps it with the row (`extra`), `to_wire` strips it like every `_` key, so
a model only ever sees media through `agent.media.vision`, and a summary only through
`describe`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypedDict

from agent.media.sniff import MediaKind
from state.values import ChatMessage

__all__ = ["MEDIA_KEY", "MediaRef", "Origin", "describe", "has_images", "media_of", "with_media"]

MEDIA_KEY = "_media"

Origin = Literal["photo", "voice", "audio", "document", "file"]
"""What the person sent, as the platform named it (a photo, a voice note, ...)."""


class MediaRef(TypedDict, total=False):
    sha256: str
    owner: str
    kind: MediaKind
    mime: str
    size_bytes: int
    origin: Origin
    name: str
    """The file name the sender gave, if any (shown, never trusted for the type)."""
    width: int
    height: int


def media_of(msg: ChatMessage | dict[str, Any]) -> list[MediaRef]:
    """The message's references, the well-formed ones only."""
    raw = msg.get("_media")
    if not isinstance(raw, list):
        return []
    return [r for r in raw if isinstance(r, dict) and isinstance(r.get("sha256"), str)]  # type: ignore[misc]


def with_media(msg: ChatMessage, refs: Sequence[MediaRef]) -> ChatMessage:
    """`msg` carrying `refs` (a copy; no refs: `msg` itself)."""
    if not refs:
        return msg
    out: dict[str, Any] = dict(msg)
    out[MEDIA_KEY] = [dict(r) for r in refs]
    return out  # type: ignore[return-value]


def has_images(msg: ChatMessage) -> bool:
    return any(r.get("kind") == "image" for r in media_of(msg))


def describe(ref: MediaRef) -> str:
    """One line naming a stored file without its bytes, e.g.
    `photo image/jpeg 1200×800, 181 KB, media:3fa4c2d1e0b9`."""
    what = ref.get("origin") or ref.get("kind") or "file"
    parts = [f"{what} {ref.get('mime', '')}".strip()]
    if ref.get("width") and ref.get("height"):
        parts[0] += f" {ref['width']}×{ref['height']}"
    if ref.get("name"):
        parts.append(repr(ref["name"])[:80])
    size = int(ref.get("size_bytes") or 0)
    parts.append(f"{max(1, size // 1024):,} KB")
    parts.append(f"media:{ref['sha256'][:12]}")
    return ", ".join(parts)
