"""End to end: photos, voice notes and documents sent with the real python-telegram-bot against
the fake Bot API (getFile, the file server, its 20 MB limit), the runner, a real Runtime on
FakeLLM and SQLite. The model receives what a person sent: an image part and the caption, the
transcript of a voice note, a PDF's text; a file that cannot be taken is one sentence and the
next message works."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.media_intake import VOICE_MARKER
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, RecordedRequest
from tests.agent.media.images import jpeg, ogg_voice, pdf, png
from tests.fakes.telegram import FakeTelegram
from tests.fakes.transcription import FakeTranscription
from tests.gateway.harness import make_config, start_runtime
from tests.gateway.platform_drivers import TelegramDriver, wait_until

ALICE, BOB = TelegramDriver.IDS["alice"], TelegramDriver.IDS["bob"]
Gateway = Callable[..., Any]


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


@pytest.fixture
def gateway(
    telegram: FakeTelegram, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Gateway:
    driver = TelegramDriver(telegram)

    @asynccontextmanager
    async def running(**sections: Any) -> AsyncIterator[tuple[GatewayRunner, Any]]:
        config = make_config(
            llm, tmp_path / "state.db", gateway=driver.gateway_config(), **sections
        )
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime, [driver.adapter()])
            await runner.start()
            try:
                yield runner, runtime
            finally:
                await runner.stop()

    return running


async def _replies(telegram: FakeTelegram, chat: int, count: int, ends_with: str = "") -> list[str]:
    """The chat's replies as the person reads them (streamed edits applied), once `count` are
    there and the last ends with `ends_with`."""
    driver = TelegramDriver(telegram)
    person = "alice" if chat == ALICE else "bob"

    def ready() -> bool:
        replies = driver.replies(person)
        return len(replies) >= count and replies[count - 1].endswith(ends_with)

    await wait_until(ready, what=f"{count} replies in chat {chat} ending {ends_with!r}")
    return driver.replies(person)


def _photo_sizes(telegram: FakeTelegram, big: bytes) -> list[dict[str, Any]]:
    """A thumbnail and the full photo, smallest first, as Telegram sends them."""
    thumb = telegram.files.add(jpeg(90, 60), folder="photos")
    full = telegram.files.add(big, folder="photos")
    return [
        {**thumb, "width": 90, "height": 60},
        {**full, "width": 1600, "height": 1200},
    ]


def _last_user(request: RecordedRequest) -> Any:
    assert request.json is not None
    return [m for m in request.json["messages"] if m["role"] == "user"][-1]["content"]


async def test_photo_with_caption_reaches_anthropic_as_an_image_block(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """The largest size is fetched through getFile and arrives as a native base64 image block,
    fitted to Anthropic's 1568-px long side, after the caption."""
    from PIL import Image

    async with gateway(model={"vision": True}) as (_, runtime):
        sizes = _photo_sizes(telegram, jpeg(1600, 1200))
        await telegram.push_media(ALICE, ALICE, caption="what plant is this?", photo=sizes)
        await _replies(telegram, ALICE, 1)
    content = _last_user(llm.api_requests("anthropic")[-1])
    assert content[0] == {"type": "text", "text": "what plant is this?"}
    image = content[1]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/jpeg"
    with Image.open(io.BytesIO(base64.b64decode(image["source"]["data"]))) as seen:
        assert seen.size == (1568, 1176)
    assert telegram.files.get_file_calls == [sizes[1]["file_id"]]  # the big one, once
    stored = list((runtime.home / "media").rglob("*"))
    assert any(p.is_file() for p in stored)


async def test_photo_reaches_openai_chat_as_an_image_url_part(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """On the OpenAI route the photo is an `image_url` part with a data URL, long side 2048."""
    from PIL import Image

    model = {"provider": "openai", "base_url": llm.openai_base_url, "default": "gpt-4o"}
    async with gateway(model=model):
        await telegram.push_media(
            ALICE,
            ALICE,
            caption="read the receipt",
            photo=[
                {
                    **telegram.files.add(png(3000, 1000), folder="photos"),
                    "width": 3000,
                    "height": 1000,
                }
            ],
        )
        await _replies(telegram, ALICE, 1)
    content = _last_user(llm.api_requests("openai")[-1])
    assert content[0] == {"type": "text", "text": "read the receipt"}
    url = content[1]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as seen:
        assert seen.size == (2048, 683)


async def test_a_blind_model_gets_a_note_and_answers(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """A model that cannot see gets one line about the photo instead of an image part."""
    async with gateway(model={"vision": False}):
        sizes = _photo_sizes(telegram, jpeg(400, 300))
        await telegram.push_media(ALICE, ALICE, caption="what is it", photo=sizes)
        replies = await _replies(telegram, ALICE, 1)
    content = _last_user(llm.api_requests("anthropic")[-1])
    assert [b["type"] for b in content] == ["text", "text"]
    assert "cannot see images" in content[1]["text"]
    assert not replies[0].startswith("⚠️")


async def test_voice_note_reaches_the_model_as_its_transcript(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """The voice note goes to the transcription endpoint as a multipart `file` + `model`; the
    model gets the transcript, marked as spoken."""
    async with FakeTranscription(text="buy oat milk and call mum", key=None) as whisper:
        media = {"transcription": {"base_url": whisper.base_url, "api_key_env": None}}
        async with gateway(media=media):
            voice = {
                **telegram.files.add(ogg_voice(), folder="voice"),
                "duration": 2,
                "mime_type": "audio/ogg",
            }
            await telegram.push_media(ALICE, ALICE, voice=voice)
            await _replies(telegram, ALICE, 1)
        assert [(c.model, c.filename) for c in whisper.calls] == [("whisper-1", "voice.ogg")]
        assert whisper.calls[0].data == ogg_voice()
    said = _last_user(llm.api_requests("anthropic")[-1])
    text = said if isinstance(said, str) else said[0]["text"]
    assert text == f"{VOICE_MARKER} buy oat milk and call mum"


async def test_pdf_reaches_the_model_as_text(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM
) -> None:
    """A PDF document's text layer is in the message, with its name and the caption."""
    async with gateway():
        doc = {
            **telegram.files.add(pdf("Invoice 4711 total 99.50 EUR")),
            "file_name": "inv.pdf",
            "mime_type": "application/pdf",
        }
        await telegram.push_media(ALICE, ALICE, caption="pay this?", document=doc)
        await _replies(telegram, ALICE, 1)
    said = _last_user(llm.api_requests("anthropic")[-1])
    text = said if isinstance(said, str) else "".join(b.get("text", "") for b in said)
    assert text.startswith("pay this?")
    assert "'inv.pdf' (PDF, 1 pages)" in text and "Invoice 4711 total 99.50 EUR" in text


@pytest.mark.parametrize("case", ["unsupported", "oversized", "voice_without_transcription"])
async def test_a_file_that_cannot_be_taken_is_one_sentence_and_the_next_message_works(
    gateway: Gateway, telegram: FakeTelegram, llm: FakeLLM, case: str
) -> None:
    """Refused with one sentence, the model is not called, nothing is stored; the next text
    message is answered as usual."""
    async with gateway() as (_, runtime):
        if case == "unsupported":
            doc = {**telegram.files.add(b"\x00\x01MZ\x90binary"), "file_name": "setup.exe"}
            await telegram.push_media(ALICE, ALICE, document=doc)
        elif case == "oversized":
            doc = {**telegram.files.add(None, size=30 * 1024 * 1024), "file_name": "big.pdf"}
            await telegram.push_media(ALICE, ALICE, document=doc)
        else:
            voice = {**telegram.files.add(ogg_voice(), folder="voice"), "duration": 1}
            await telegram.push_media(ALICE, ALICE, voice=voice)
        refusal = (await _replies(telegram, ALICE, 1))[0]
        assert refusal.startswith("⚠️") and refusal.count(".") <= 2
        assert llm.api_requests("anthropic") == []
        await telegram.push_text(ALICE, ALICE, "hello again")
        await _replies(telegram, ALICE, 2, ends_with="hello again")  # FakeLLM echoes it
        sent = llm.api_requests("anthropic")[-1].json
        assert sent is not None and [m["role"] for m in sent["messages"]] == ["user"]
        assert not [p for p in (runtime.home / "media").rglob("*") if p.is_file()]
    if case == "oversized":
        assert "20 MB" in refusal and telegram.files.downloads == []
