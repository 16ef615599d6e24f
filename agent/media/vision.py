"""Which models can see, and a request's media turned into what the model receives: image parts
for a model that sees, one line of text for one that does not. Pure over loaded images."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from agent.media.image_fit import FittedImage
from agent.media.marks import MARK_OPEN, find_marks
from agent.media.refs import MEDIA_KEY, describe, media_of
from state.values import ChatMessage, content_text

__all__ = [
    "VisionSetting",
    "attach_media",
    "data_url",
    "model_sees_images",
    "recalled_marks",
    "show_recalled",
    "wanted_images",
]

VisionSetting = bool | Literal["auto"]

_SEES = re.compile(
    r"claude-(3|sonnet|opus|haiku)|gpt-4o|gpt-4\.1|gpt-4-turbo|gpt-4\.5|gpt-5|chatgpt-4o|"
    r"\bo[134]\b|o[134]-|gemini|pixtral|llava|vision|-vl\b|-vl-|qwen2\.5-vl|qwen-vl|gemma-3|"
    r"llama-4|mistral-(small|medium)-3|grok-(2-vision|4)",
    re.IGNORECASE,
)
_BLIND = re.compile(r"gpt-3\.5|o3-mini|o1-mini|deepseek|codestral|embed|whisper", re.IGNORECASE)
"""Known text-only families inside patterns that would otherwise match (o3-mini, o1-mini)."""
_MARKS = re.compile(r"\n?⟦image [^⟧]{1,1200}⟧")


def model_sees_images(model: str, setting: VisionSetting = "auto") -> bool:
    """`model.vision` when set; for "auto", what the model's family is known to do (an unknown
    model is taken as blind: it gets a note, never a request it refuses)."""
    if setting is not True and setting is not False:
        return _SEES.search(model) is not None and _BLIND.search(model) is None
    return setting


def wanted_images(messages: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    """(owner, sha256) of every image the messages reference, once each, in order."""
    seen: dict[tuple[str, str], None] = {}
    for msg in messages:
        for ref in media_of(msg):
            if ref.get("kind") == "image":
                seen.setdefault((str(ref.get("owner", "")), ref["sha256"]), None)
    return list(seen)


def data_url(image: FittedImage) -> str:
    return f"data:{image.mime};base64,{base64.b64encode(image.data).decode('ascii')}"


def attach_media(
    messages: Sequence[ChatMessage],
    images: Mapping[str, FittedImage],
    *,
    sees: bool,
) -> list[ChatMessage]:
    """The messages as the model gets them: a message with image references gets an
    `image_url` part per image (`images` by sha256) when the model `sees`, else one line per
    image saying it cannot be shown; other media is already text. Messages without media are
    the same objects; the rest are copies without the `_media` key."""
    out: list[ChatMessage] = []
    for msg in messages:
        refs = [r for r in media_of(msg) if r.get("kind") == "image"]
        if not refs:
            out.append(msg)
            continue
        blocks = _text_blocks(msg)
        for ref in refs:
            image = images.get(ref["sha256"])
            if sees and image is not None:
                blocks.append({"type": "image_url", "image_url": {"url": data_url(image)}})
            elif image is None and sees:
                blocks.append(_text(f"[{describe(ref)}: the file is no longer stored]"))
            else:
                blocks.append(_text(f"[{describe(ref)}: this model cannot see images]"))
        copy: dict[str, Any] = {k: v for k, v in msg.items() if k != MEDIA_KEY}
        copy["content"] = blocks
        out.append(copy)  # type: ignore[arg-type]
    return out


def _text_blocks(msg: ChatMessage) -> list[dict[str, Any]]:
    content = msg.get("content")
    if isinstance(content, str):
        return [_text(content)] if content else []
    if isinstance(content, list):
        return [dict(b) for b in content if isinstance(b, dict)]
    return []


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def recalled_marks(
    messages: Sequence[ChatMessage], verify: Callable[[str, str, str], bool]
) -> list[tuple[str, str]]:
    """(owner, sha256) of the images `recall` brought back in tool results, signed marks only."""
    found: dict[tuple[str, str], None] = {}
    for msg in messages:
        if msg.get("role") != "tool":
            continue
        for mark in find_marks(content_text(msg)):
            if mark.tag is not None and verify(mark.owner, mark.sha256, mark.tag):
                found.setdefault((mark.owner, mark.sha256), None)
    return list(found)


def show_recalled(
    messages: Sequence[ChatMessage],
    images: Mapping[str, FittedImage],
    *,
    sees: bool,
    verify: Callable[[str, str, str], bool],
) -> list[ChatMessage]:
    """Tool results without their marks; for a model that sees, after each run of tool
    results whose marks hold, one user message showing those images again."""
    out: list[ChatMessage] = []
    pending: list[FittedImage] = []
    for index, msg in enumerate(messages):
        if msg.get("role") == "tool" and MARK_OPEN in content_text(msg):
            for mark in find_marks(content_text(msg)):
                image = images.get(mark.sha256)
                holds = mark.tag is not None and verify(mark.owner, mark.sha256, mark.tag)
                if sees and holds and image is not None and image not in pending:
                    pending.append(image)
            copy: dict[str, Any] = dict(msg)
            copy["content"] = _MARKS.sub("", content_text(msg))
            out.append(copy)  # type: ignore[arg-type]
        else:
            out.append(msg)
        run_ends = index + 1 == len(messages) or messages[index + 1].get("role") != "tool"
        if pending and run_ends:
            parts = [_text("[the images recall brought back]")]
            parts += [{"type": "image_url", "image_url": {"url": data_url(i)}} for i in pending]
            out.append({"role": "user", "content": parts})
            pending = []
    return out
