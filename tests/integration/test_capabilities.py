"""End to end: principals and approvals across the front doors, on a real Runtime and FakeLLM.

An HTTP key without a grant is never offered the terminal tool and cannot call it; a granted
key still cannot run what needs approval (nobody can approve over HTTP). A Telegram admin is
asked with buttons and the command runs only on "Allow"; a user who is not an admin is refused
without a question. The real openai SDK and python-telegram-bot drive the fakes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.http import HttpApiServer
from gateway.platforms.telegram import TelegramAdapter
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import make_config, start_runtime
from tests.waits import WAIT_S

KEY = "sk-hermes-capabilities-test"
ADMIN, USER = 1001, 1002


def _terminal_call(command: str) -> Turn:
    return Turn(tool_calls=[ToolCallSpec("terminal", json.dumps({"command": command}))])


def _tool_results(body: dict[str, Any] | None) -> list[str]:
    """The tool_result texts of an Anthropic request body."""
    out: list[str] = []
    for message in (body or {}).get("messages", []):
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content")
                out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def _offered(body: dict[str, Any] | None) -> list[str]:
    return [tool["name"] for tool in (body or {}).get("tools", [])]


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


async def _http(
    llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, http_tools: list[str] | None
) -> AsyncIterator[openai.AsyncOpenAI]:
    config = make_config(
        llm,
        tmp_path / "state.db",
        tools={"enabled": ["terminal", "read_file", "write_file"], "workspace": str(tmp_path)},
        gateway={"http": {"tools": http_tools}},
    )
    async with start_runtime(config, _hermes_home(tmp_path), monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        server = HttpApiServer(runner, host="127.0.0.1", port=0, api_key=KEY)
        await server.start()
        client = openai.AsyncOpenAI(
            api_key=KEY,
            base_url=f"http://127.0.0.1:{server.port}/v1",
            max_retries=0,
            timeout=WAIT_S,
        )
        try:
            yield client
        finally:
            await client.close()
            await server.stop()
            await runner.stop()


async def test_an_http_key_without_a_grant_cannot_reach_the_terminal(
    llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model is not offered terminal or write_file, and a call to terminal is refused."""
    marker = tmp_path / "ran"
    llm.script(_terminal_call(f"touch {marker}"), Turn(text="ok"))
    async for client in _http(llm, tmp_path, monkeypatch, http_tools=None):
        await client.chat.completions.create(
            model="test-model", messages=[{"role": "user", "content": "make a file"}]
        )
    first, second = llm.requests[0].json, llm.requests[1].json
    assert _offered(first) == ["read_file"]
    assert not marker.exists()
    assert any("not available to http key default" in t for t in _tool_results(second))


async def test_a_granted_http_key_is_refused_what_needs_approval(
    llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With terminal granted, safe commands run; one that needs a person is refused with why."""
    marker = tmp_path / "ran"
    llm.script(
        _terminal_call(f"touch {marker}"),
        _terminal_call("git push --force"),
        Turn(text="ok"),
    )
    async for client in _http(llm, tmp_path, monkeypatch, http_tools=["terminal"]):
        await client.chat.completions.create(
            model="test-model", messages=[{"role": "user", "content": "go"}]
        )
    assert _offered(llm.requests[0].json) == ["terminal"]
    assert marker.exists()
    results = _tool_results(llm.requests[2].json)
    assert (
        results[-1].startswith("Refused: git push --force") and "nobody can approve" in results[-1]
    )


# --- Telegram: the approval is asked where the user is ---------------------------------------


@pytest.fixture
async def telegram(
    llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        grant = {str(ADMIN): ["terminal"], str(USER): ["terminal"]}
        config = make_config(
            llm,
            tmp_path / "state.db",
            tools={"enabled": ["terminal"], "workspace": str(tmp_path), "approval_timeout_s": 1.0},
            gateway={
                "telegram": {
                    "allowed_users": [str(ADMIN), str(USER)],
                    "admins": [str(ADMIN)],
                    "user_tools": grant,
                }
            },
        )
        async with start_runtime(config, _hermes_home(tmp_path), monkeypatch) as runtime:
            adapter = TelegramAdapter(
                token=fake.token, base_url=fake.base_url, poll_timeout_s=1.0, request_timeout_s=3.0
            )
            runner = GatewayRunner(runtime, [adapter])
            await runner.start()
            try:
                yield fake
            finally:
                await runner.stop()


async def _question(fake: FakeTelegram, chat: int) -> tuple[int, dict[str, str]]:
    await fake.wait_for(
        lambda: any(m.chat_id == chat and m.text.startswith("⚠️") for m in fake.sent), WAIT_S
    )
    sent = next(m for m in fake.sent if m.chat_id == chat and m.text.startswith("⚠️"))
    markup = fake.markup_of(chat, sent.message_id) or {"inline_keyboard": []}
    return sent.message_id, {
        b["text"]: b["callback_data"] for r in markup["inline_keyboard"] for b in r
    }


@pytest.mark.parametrize(("label", "runs"), [("Allow once", True), ("Deny", False)])
async def test_a_telegram_admin_is_asked_with_buttons(
    telegram: FakeTelegram, llm: FakeLLM, tmp_path: Path, label: str, runs: bool
) -> None:
    """The exact command is asked in the admin's chat; it runs only when they allow it."""
    marker = tmp_path / "ran"
    command = f"touch {marker}; false && reboot"
    llm.script(_terminal_call(command), Turn(text="finished"))
    await telegram.push_text(ADMIN, ADMIN, "restart it", username="ada")
    message_id, buttons = await _question(telegram, ADMIN)
    assert command in telegram.text_of(ADMIN, message_id)
    await telegram.press_button(ADMIN, message_id, ADMIN, buttons[label], username="ada")
    await telegram.wait_for(lambda: any(m.text == "finished" for m in telegram.sent), WAIT_S)
    assert marker.exists() is runs
    result = _tool_results(llm.requests[1].json)[-1]
    assert (
        result.endswith("[exit code 1]")
        if runs
        else result.startswith("Refused: the user declined")
    )


async def test_an_unanswered_telegram_question_is_denied(
    telegram: FakeTelegram, llm: FakeLLM, tmp_path: Path
) -> None:
    """tools.approval_timeout_s passes without a press: the command is refused, not run."""
    marker = tmp_path / "ran"
    llm.script(_terminal_call(f"touch {marker}; false && reboot"), Turn(text="finished"))
    await telegram.push_text(ADMIN, ADMIN, "restart it", username="ada")
    message_id, _ = await _question(telegram, ADMIN)
    await telegram.wait_for(lambda: any(m.text == "finished" for m in telegram.sent), WAIT_S)
    assert not marker.exists() and telegram.markup_of(ADMIN, message_id) is None
    assert _tool_results(llm.requests[1].json)[-1].startswith("Refused: the user declined")


async def test_a_telegram_user_who_is_not_an_admin_is_refused_without_a_question(
    telegram: FakeTelegram, llm: FakeLLM, tmp_path: Path
) -> None:
    """Nobody can approve in a non-admin's direct chat: refused with the reason, no buttons."""
    marker = tmp_path / "ran"
    llm.script(_terminal_call(f"touch {marker}; false && reboot"), Turn(text="finished"))
    await telegram.push_text(USER, USER, "restart it", username="bob")
    await telegram.wait_for(lambda: any(m.text == "finished" for m in telegram.sent), WAIT_S)
    assert not marker.exists()
    assert not any(m.text.startswith("⚠️") for m in telegram.sent)
    result = _tool_results(llm.requests[1].json)[-1]
    assert result.startswith("Refused:") and "nobody can approve" in result


def _hermes_home(tmp_path: Path) -> Path:
    """HERMES_HOME beside the workspace (tmp_path): a workspace never holds HERMES_HOME."""
    home = tmp_path.parent / f"{tmp_path.name}-hermes"
    home.mkdir(exist_ok=True)
    return home
