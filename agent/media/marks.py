"""Marks that bring a stored image back into a request: `recall` writes one per image of the
rows it shows, the media store signs it (HMAC over owner and hash, a key only this process
holds), and `agent.media.attach` shows the image again to a model that can see, only when the
signature holds. Text from people never carries a mark: `unmarked` defuses one in stored text,
and a mark in a tool result a client sent is unsigned or wrongly signed. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MARK_OPEN", "Mark", "find_marks", "media_mark", "sign_marks", "unmarked"]

MARK_OPEN = "⟦image "
_MARK = re.compile(r"⟦image (\S{1,1024}) ([0-9a-f]{64})(?: ([0-9a-f]{32}))?⟧")


@dataclass(frozen=True, slots=True, kw_only=True)
class Mark:
    owner: str
    sha256: str
    tag: str | None


def media_mark(owner: str, sha256: str) -> str:
    """An unsigned mark for `owner`'s image `sha256`."""
    return f"⟦image {owner} {sha256}⟧"


def unmarked(text: str) -> str:
    """`text` with anything that looks like a mark defused (stored words never carry one)."""
    return text.replace("⟦", "[")


def sign_marks(text: str, sign: Callable[[str, str], str]) -> str:
    """Every mark in `text` signed with `sign(owner, sha256)`."""
    return _MARK.sub(lambda m: f"⟦image {m[1]} {m[2]} {sign(m[1], m[2])}⟧", text)


def find_marks(text: str) -> list[Mark]:
    """The marks in `text`, signed or not, in order."""
    return [Mark(owner=m[1], sha256=m[2], tag=m[3]) for m in _MARK.finditer(text)]
