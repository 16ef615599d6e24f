"""Files that came with a message become the user's message: stored once for their owner and
referenced (photos), transcribed (voice notes), read as text (PDF, text, code, CSV). Anything
that cannot be taken is refused with one sentence (MediaRefused) before anything is stored, so
the session goes on as if the message had not come."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from agent.errors import MediaRefused
from agent.media import MediaKind, MediaRef, Origin, Sniffed, limit_for, sniff, with_media
from agent.media.documents import document_text
from agent.messages import ChatMessage, user_message
from agent.tokens import estimate_message_tokens_rough
from gateway.intake import WINDOW_SHARE
from gateway.platforms.base import InboundFile, InboundMessage
from gateway.transcription import Transcriber
from state import MediaStore, StoredMedia

__all__ = ["MediaIntake", "VOICE_MARKER", "refusal_for", "said_of", "store_checked"]

log = structlog.get_logger(__name__)

VOICE_MARKER = "🎤 (voice note, transcribed)"
"""Starts the text of a transcribed voice note, so the model (and a reader of the archive)
knows the words were spoken, not typed."""
_UNREADABLE = (
    "I can't read that kind of file; I take photos, voice notes and audio, PDF and text files"
)


def refusal_for(file: InboundFile, found: Sniffed, size: int) -> MediaRefused | None:
    """Why `file` (sniffed as `found`, `size` bytes) cannot be taken, or None; pure."""
    if found.kind == "other":
        return MediaRefused(f"{_UNREADABLE} (that one looks like {found.mime})")
    limit = limit_for(found.kind)
    if size > limit:
        return MediaRefused(
            f"That {file.origin} is {size / 1_048_576:.1f} MB; I take files up to "
            f"{limit // 1_048_576} MB",
            status=413,
        )
    return None


async def store_checked(media: MediaStore, owner: str, file: InboundFile) -> StoredMedia:
    """`file` sniffed, checked and stored for `owner`; raises MediaRefused."""
    if file.data is None:
        raise MediaRefused(file.refusal or f"I could not download that {file.origin}")
    found = await asyncio.to_thread(sniff, file.data)
    if (refusal := refusal_for(file, found, len(file.data))) is not None:
        raise refusal
    return await _put(media, owner, file, found)


async def _put(media: MediaStore, owner: str, file: InboundFile, found: Sniffed) -> StoredMedia:
    assert file.data is not None
    return await media.put(
        owner,
        file.data,
        kind=found.kind,
        mime=found.mime,
        width=found.width,
        height=found.height,
        name=file.name,
    )


def ref_of(stored: StoredMedia, origin: Origin) -> MediaRef:
    """The reference a message keeps to `stored` (what it is, never its bytes)."""
    ref: MediaRef = {
        "sha256": stored.sha256,
        "owner": stored.owner,
        "kind": _kind(stored.kind),
        "mime": stored.mime,
        "size_bytes": stored.size_bytes,
        "origin": origin,
    }
    if stored.name:
        ref["name"] = stored.name
    if stored.width and stored.height:
        ref["width"], ref["height"] = stored.width, stored.height
    return ref


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaIntake:
    """What the runner needs to take files: the store, a transcriber if configured, caps."""

    media: MediaStore
    transcriber: Transcriber | None = None
    max_document_chars: int = 40_000
    context_length: int | None = None
    """The model's window: a message that would take more than `WINDOW_SHARE` of it is
    refused (a huge document, an image on a tiny local model), never stored."""

    async def said(
        self, message: InboundMessage, said: Sequence[ChatMessage] | None, owner: str
    ) -> Sequence[ChatMessage] | str:
        """The turn's new messages: `said` (or the text) when no file came; else one user
        message of the caption and what the files say, referencing the stored files."""
        if not message.files:
            return message.text if said is None else said
        for file in message.files:  # refuse before storing anything
            if file.data is None:
                raise MediaRefused(file.refusal or f"I could not download that {file.origin}")
        parts = [message.text] if message.text.strip() else []
        refs: list[MediaRef] = []
        checked = [(f, await asyncio.to_thread(sniff, f.data or b"")) for f in message.files]
        for file, found in checked:
            if (refusal := refusal_for(file, found, len(file.data or b""))) is not None:
                raise refusal
            if found.kind == "audio" and self.transcriber is None:
                raise MediaRefused(
                    "I can't listen to voice notes here: no transcription service is set up "
                    "(media.transcription in config.yaml); please type it"
                )
        for file, found in checked:
            assert file.data is not None
            if found.kind == "audio":
                assert self.transcriber is not None
                words = await self.transcriber.transcribe(file.data, found.mime)
                parts.append(f"{VOICE_MARKER} {words}" if words else f"{VOICE_MARKER} (silence)")
            elif found.kind in ("pdf", "text"):
                parts.append(await self._document(file, found))
            stored = await _put(self.media, owner, file, found)
            refs.append(ref_of(stored, file.origin))
            log.info("media_stored", kind=found.kind, size_bytes=stored.size_bytes)
        message_said = with_media(user_message("\n\n".join(parts)), refs)
        self._check_fits(message_said)
        return [message_said]

    def _check_fits(self, said: ChatMessage) -> None:
        if self.context_length is None:
            return
        tokens = estimate_message_tokens_rough(said)
        budget = int(self.context_length * WINDOW_SHARE)
        if tokens > budget:
            raise MediaRefused(
                f"That is about {tokens:,} tokens with what you sent, more than the model's "
                f"{self.context_length:,}-token window can take in one message; send less "
                "(a shorter document, fewer photos)",
                status=413,
            )

    async def _document(self, file: InboundFile, found: Sniffed) -> str:
        assert file.data is not None
        label = f"{file.name!r}" if file.name else "(no name)"
        try:
            doc = await asyncio.to_thread(
                document_text, file.data, found.kind, max_chars=self.max_document_chars
            )
        except ValueError as exc:
            raise MediaRefused(f"I could not read that document: {exc}") from exc
        kind = "PDF" if found.kind == "pdf" else "text"
        pages = f", {doc.pages} pages" if doc.pages else ""
        head = f"📄 Document {label} ({kind}{pages})"
        if not doc.text.strip():
            return f"{head}: it has no text layer (a scan?), so I cannot read it as text"
        if doc.is_cut:
            return (
                f"{head}, the first {len(doc.text):,} characters; it is longer: read on with "
                f"read_document(media='media:{_sha(file.data)}', offset={len(doc.text)}):\n"
                f"{doc.text}"
            )
        return f"{head}:\n{doc.text}"


def _kind(kind: str) -> MediaKind:
    """A stored row's kind (written from `sniff`) as the type it is."""
    match kind:
        case "image" | "audio" | "pdf" | "text":
            return kind
        case _:
            return "other"


def _sha(data: bytes) -> str:
    from state import sha256_of

    return sha256_of(data)


async def said_of(
    intake: MediaIntake | None,
    message: InboundMessage,
    said: Sequence[ChatMessage] | None,
    owner: str,
) -> Sequence[ChatMessage] | str:
    """What the runner hands the agent for `message` (see `MediaIntake.said`); a runner
    without media refuses files with one sentence."""
    if intake is None:
        if message.files:
            raise MediaRefused("I can't take files here; please send text")
        return message.text if said is None else said
    return await intake.said(message, said, owner)
