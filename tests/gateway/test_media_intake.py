"""Files into the user's message: stored and referenced, transcribed, read as text, or refused
with one sentence before anything is stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.errors import MediaRefused
from gateway.media_intake import VOICE_MARKER, MediaIntake, refusal_for, said_of
from gateway.platforms.base import ChatRef, InboundFile, InboundMessage
from gateway.transcription import Transcriber
from state import MediaStore, SqlSessionStore, sha256_of
from tests.agent.media.images import ogg_voice, pdf, png
from tests.fakes.transcription import FakeTranscription

OWNER = "telegram:1001"


def _message(*files: InboundFile, text: str = "") -> InboundMessage:
    return InboundMessage(
        chat=ChatRef(platform="telegram", chat_id="1001"),
        user_id="1001",
        text=text,
        is_direct=True,
        files=files,
    )


@pytest.fixture
async def media(tmp_path: Path) -> AsyncIterator[MediaStore]:
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    try:
        yield MediaStore(store, tmp_path / "media")
    finally:
        await store.aclose()


async def test_text_only_messages_pass_through(media: MediaStore) -> None:
    """No files: the text (or the caller's messages) is the turn, untouched."""
    intake = MediaIntake(media=media)
    assert await intake.said(_message(text="hi"), None, OWNER) == "hi"
    assert await said_of(None, _message(text="hi"), None, OWNER) == "hi"


async def test_a_photo_is_referenced_not_carried(media: MediaStore) -> None:
    """The caption is the text; the photo is a `_media` reference owned by the sender."""
    said = await MediaIntake(media=media).said(
        _message(InboundFile(origin="photo", data=png(40, 30)), text="look"), None, OWNER
    )
    assert not isinstance(said, str)
    (message,) = said
    assert message["content"] == "look"
    (ref,) = message["_media"]
    assert (
        ref["owner"] == OWNER
        and ref["kind"] == "image"
        and (ref["width"], ref["height"]) == (40, 30)
    )
    assert await media.read(OWNER, ref["sha256"]) == png(40, 30)


async def test_a_long_document_is_cut_and_points_at_the_stored_copy(media: MediaStore) -> None:
    """Text over `max_document_chars` is cut; the message says how to read on."""
    text = ("line of notes\n" * 400).encode()
    said = await MediaIntake(media=media, max_document_chars=1000).said(
        _message(InboundFile(origin="document", data=text, name="notes.md")), None, OWNER
    )
    assert not isinstance(said, str)
    body = said[0]["content"]
    assert isinstance(body, str)
    assert "the first 1,000 characters" in body
    assert f"read_document(media='media:{sha256_of(text)}', offset=1000)" in body
    assert len(body) < 1400


async def test_a_pdf_is_read(media: MediaStore) -> None:
    """A PDF's text layer is the message."""
    said = await MediaIntake(media=media).said(
        _message(InboundFile(origin="document", data=pdf("Total 12.00"), name="r.pdf")), None, OWNER
    )
    assert not isinstance(said, str) and "Total 12.00" in str(said[0]["content"])


async def test_a_voice_note_is_transcribed_with_the_key(media: MediaStore) -> None:
    """The transcription request carries the bearer key, `model` and the file (.ogg)."""
    async with FakeTranscription(text="hello there", key="sk-voice") as fake:
        transcriber = Transcriber(
            fake.base_url, model="whisper-large-v3", api_key="sk-voice", timeout_s=5
        )
        said = await MediaIntake(media=media, transcriber=transcriber).said(
            _message(InboundFile(origin="voice", data=ogg_voice())), None, OWNER
        )
        assert [(c.model, c.filename) for c in fake.calls] == [("whisper-large-v3", "voice.ogg")]
    assert not isinstance(said, str)
    assert said[0]["content"] == f"{VOICE_MARKER} hello there"
    assert said[0]["_media"][0]["kind"] == "audio"


async def test_a_refused_transcription_is_one_sentence_and_stores_nothing(
    media: MediaStore,
) -> None:
    """A wrong key (401) is MediaRefused; the audio is not kept."""
    async with FakeTranscription(key="sk-right") as fake:
        transcriber = Transcriber(fake.base_url, model="whisper-1", api_key="sk-wrong", timeout_s=5)
        with pytest.raises(MediaRefused, match="401"):
            await MediaIntake(media=media, transcriber=transcriber).said(
                _message(InboundFile(origin="voice", data=ogg_voice())), None, OWNER
            )
    assert not [p for p in media.root.rglob("*") if p.is_file()]


async def test_a_message_too_big_for_the_window_is_refused(media: MediaStore) -> None:
    """A tiny window cannot take a photo: one sentence, nothing stored."""
    intake = MediaIntake(media=media, context_length=1_000)
    with pytest.raises(MediaRefused, match="window"):
        await intake.said(_message(InboundFile(origin="photo", data=png(1500, 1500))), None, OWNER)


async def test_files_without_media_are_refused(media: MediaStore) -> None:
    """A runner without a media store answers files with one sentence."""
    with pytest.raises(MediaRefused):
        await said_of(None, _message(InboundFile(origin="photo", data=png())), None, OWNER)


@pytest.mark.parametrize(
    ("data", "status", "words"),
    [
        (b"\x7fELF\x02\x01\x01\x00binary", 400, "can't read that kind of file"),
        (png(10, 10) + b"\x00" * (21 * 1024 * 1024), 413, "up to 20 MB"),
    ],
)
def test_refusal_for(data: bytes, status: int, words: str) -> None:
    """Unknown types and oversized files are refused by their sniffed kind's limit."""
    from agent.media import sniff

    file = InboundFile(origin="document", data=data)
    refusal = refusal_for(file, sniff(data), len(data))
    assert refusal is not None and refusal.status == status and words in str(refusal)
