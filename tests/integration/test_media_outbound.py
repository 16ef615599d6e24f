"""`send_file` end to end: the model asks to send a workspace file; after the reply, real PTB
sends it as a Telegram photo or document (sendPhoto / sendDocument multipart upload to the fake
Bot API) and real discord.py posts it as an attachment (files[n] + payload_json to
FakeDiscord). A file outside the workspace is refused to the model, and the chat still gets
the reply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.agent.media.images import pdf, png
from tests.fakes.discord import FakeDiscord, patch_discord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import make_config, start_runtime
from tests.gateway.platform_drivers import DiscordDriver, TelegramDriver, wait_until

__all__ = ["patch_discord"]
ALICE = TelegramDriver.IDS["alice"]


def _send(path: str, caption: str = "here you go") -> Turn:
    arguments = json.dumps({"path": path, "caption": caption})
    return Turn(tool_calls=[ToolCallSpec(name="send_file", arguments=arguments)])


def _config(llm: FakeLLM, tmp_path: Path, gateway: dict[str, Any]) -> Any:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "chart.png").write_bytes(png(120, 80))
    (workspace / "report.pdf").write_bytes(pdf("Q3 report"))
    return make_config(
        llm,
        tmp_path / "state.db",
        gateway=gateway,
        tools={"enabled": ["send_file"], "workspace": str(workspace)},
    )


async def test_telegram_gets_a_photo_and_a_document_after_the_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image goes as sendPhoto, a PDF as sendDocument, each with its caption, after the
    reply's text."""
    async with FakeTelegram() as telegram, FakeLLM() as llm:
        llm.script(
            _send("chart.png", "your chart"),
            _send("report.pdf", "the report"),
            Turn(text="Sent both."),
        )
        driver = TelegramDriver(telegram)
        async with start_runtime(
            _config(llm, tmp_path, driver.gateway_config()), tmp_path, monkeypatch
        ) as runtime:
            runner = GatewayRunner(runtime, [driver.adapter()])
            await runner.start()
            try:
                await telegram.push_text(ALICE, ALICE, "send me the chart and the report")
                await wait_until(lambda: len(telegram.files.received) == 2, what="two uploads")
            finally:
                await runner.stop()
    photo, document = telegram.files.received
    assert (photo.kind, photo.filename, photo.caption) == ("photo", "chart.png", "your chart")
    assert photo.data == png(120, 80)
    assert (document.kind, document.filename, document.caption) == (
        "document",
        "report.pdf",
        "the report",
    )
    assert driver.replies("alice")[0] == "Sent both."
    assert telegram.calls.index("sendMessage") < telegram.calls.index("sendPhoto")


async def test_discord_gets_an_attachment(
    patch_discord: FakeDiscord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is posted as files[0] with the caption as the message text."""
    fake = patch_discord
    async with FakeLLM() as llm:
        llm.script(_send("report.pdf", "the report"), Turn(text="Here it is."))
        driver = DiscordDriver(fake)
        async with start_runtime(
            _config(llm, tmp_path, driver.gateway_config()), tmp_path, monkeypatch
        ) as runtime:
            runner = GatewayRunner(runtime, [driver.adapter()])
            await runner.start()
            try:
                await fake.user_says("the report please", channel_id=fake.dm_id)
                await wait_until(lambda: len(fake.uploads) == 1, what="one upload")
            finally:
                await runner.stop()
    channel, name, data, content = fake.uploads[0]
    assert (channel, name, content) == (fake.dm_id, "report.pdf", "the report")
    assert data == pdf("Q3 report")


async def test_a_file_outside_the_workspace_is_refused_to_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`../state.db` is not sent; the model hears why, and the person gets the reply."""
    async with FakeTelegram() as telegram, FakeLLM() as llm:
        llm.script(_send("../state.db"), Turn(text="I cannot send that."))
        driver = TelegramDriver(telegram)
        async with start_runtime(
            _config(llm, tmp_path, driver.gateway_config()), tmp_path, monkeypatch
        ) as runtime:
            runner = GatewayRunner(runtime, [driver.adapter()])
            await runner.start()
            try:
                await telegram.push_text(ALICE, ALICE, "send me your database")
                await wait_until(
                    lambda: driver.replies("alice") == ["I cannot send that."], what="the reply"
                )
            finally:
                await runner.stop()
        tool_result = [
            m
            for m in llm.api_requests("anthropic")[-1].json["messages"]  # type: ignore[index]
            if m["role"] == "user" and isinstance(m["content"], list)
        ][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and "inside the workspace" in str(tool_result)
    assert telegram.files.received == []
