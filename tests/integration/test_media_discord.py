"""End to end on Discord: attachments with real discord.py against FakeDiscord (the gateway,
REST, and a CDN serving attachment URLs), the runner, a Runtime on FakeLLM. A photo with a
caption reaches the model as an image plus the caption; a file that cannot be taken is one
sentence and the next message works."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM
from tests.agent.media.images import jpeg, pdf
from tests.fakes.discord import FakeDiscord, patch_discord
from tests.gateway.harness import make_config, start_runtime
from tests.gateway.platform_drivers import DiscordDriver, wait_until

__all__ = ["patch_discord"]


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


async def _run(
    fake: FakeDiscord,
    llm: FakeLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    **sections: dict[str, object],
) -> AsyncIterator[tuple[DiscordDriver, GatewayRunner]]:
    driver = DiscordDriver(fake)
    config = make_config(llm, tmp_path / "state.db", gateway=driver.gateway_config(), **sections)
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime, [driver.adapter()])
        await runner.start()
        try:
            yield driver, runner
        finally:
            await runner.stop()


async def _replies(driver: DiscordDriver, count: int, ends_with: str = "") -> list[str]:
    def ready() -> bool:
        replies = driver.replies("alice")
        return len(replies) >= count and replies[count - 1].endswith(ends_with)

    await wait_until(ready, what=f"{count} replies ending {ends_with!r}")
    return driver.replies("alice")


async def test_photo_attachment_with_caption_reaches_the_model(
    patch_discord: FakeDiscord, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attachment is fetched from its URL and arrives as an Anthropic image block after
    the caption."""
    fake = patch_discord
    async for driver, _ in _run(fake, llm, tmp_path, monkeypatch, model={"vision": True}):
        photo = fake.attachment(jpeg(800, 600), "plant.jpg", "image/jpeg", width=800, height=600)
        await fake.user_says("what plant is this?", channel_id=fake.dm_id, attachments=[photo])
        await _replies(driver, 1)
    assert len(fake.cdn_downloads) == 1
    body = llm.api_requests("anthropic")[-1].json
    assert body is not None
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    assert content[0] == {"type": "text", "text": "what plant is this?"}
    assert content[1]["type"] == "image" and content[1]["source"]["media_type"] == "image/jpeg"


async def test_pdf_attachment_without_words_reaches_the_model_as_text(
    patch_discord: FakeDiscord, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file with no message text is still for the bot; its text is the message."""
    fake = patch_discord
    async for driver, _ in _run(fake, llm, tmp_path, monkeypatch):
        doc = fake.attachment(pdf("Lease ends 31 March"), "lease.pdf", "application/pdf")
        await fake.user_says("", channel_id=fake.dm_id, attachments=[doc])
        await _replies(driver, 1)
    body = llm.api_requests("anthropic")[-1].json
    assert body is not None
    said = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    text = said if isinstance(said, str) else "".join(b.get("text", "") for b in said)
    assert "'lease.pdf'" in text and "Lease ends 31 March" in text


async def test_an_oversized_attachment_is_one_sentence_and_the_next_message_works(
    patch_discord: FakeDiscord, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the limit: not downloaded, one sentence, the model not called; then text works."""
    fake = patch_discord
    async for driver, _ in _run(fake, llm, tmp_path, monkeypatch):
        big = fake.attachment(None, "movie.mp4", "video/mp4", size=80 * 1024 * 1024)
        await fake.user_says("watch this", channel_id=fake.dm_id, attachments=[big])
        refusal = (await _replies(driver, 1))[0]
        assert refusal.startswith("⚠️") and "MB" in refusal
        assert fake.cdn_downloads == [] and llm.api_requests("anthropic") == []
        await fake.user_says("hello again", channel_id=fake.dm_id)
        await _replies(driver, 2, ends_with="hello again")


async def test_a_voice_message_reaches_the_model_as_its_transcript(
    patch_discord: FakeDiscord, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Discord voice message (attachment flag IS_VOICE_MESSAGE, 1 << 13) is transcribed."""
    from gateway.media_intake import VOICE_MARKER
    from tests.agent.media.images import ogg_voice
    from tests.fakes.transcription import FakeTranscription

    fake = patch_discord
    async with FakeTranscription(text="call the plumber", key=None) as whisper:
        media = {"transcription": {"base_url": whisper.base_url, "api_key_env": None}}
        async for driver, _ in _run(fake, llm, tmp_path, monkeypatch, media=media):
            voice = fake.attachment(
                ogg_voice(),
                "voice-message.ogg",
                "audio/ogg",
                flags=1 << 13,
                duration_secs=2.0,
                waveform="AAAA",
            )
            await fake.user_says("", channel_id=fake.dm_id, attachments=[voice])
            await _replies(driver, 1)
        assert [c.filename for c in whisper.calls] == ["voice.ogg"]
    body = llm.api_requests("anthropic")[-1].json
    assert body is not None
    said = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    text = said if isinstance(said, str) else said[0]["text"]
    assert text == f"{VOICE_MARKER} call the plumber"
