"""/pin, /pins and /unpin through the runner, on the real runtime, the Anthropic SDK and FakeLLM."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent.ledger.rules import LEDGER_START
from gateway.commands import HELP_TEXT, parse_command
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import (
    RecordingSink,
    inbound,
    make_config,
    request_texts,
    start_runtime,
)
from tests.waits import WAIT_S


async def _say(runner: GatewayRunner, text: str) -> str:
    async with asyncio.timeout(WAIT_S):
        outcome = await runner.submit(inbound(text), RecordingSink())
    return outcome.reply


def _system_of_last_request(llm: FakeLLM) -> str:
    return request_texts(llm.requests[-1].json)[0]


@pytest.mark.parametrize(
    ("text", "name", "argument"),
    [("/pin be brief", "pin", "be brief"), ("/pins", "pins", ""), ("/unpin 2", "unpin", "2")],
)
def test_ledger_commands_parse(text: str, name: str, argument: str) -> None:
    """The three ledger commands are known commands, listed in /help."""
    command = parse_command(text)
    assert command is not None and (command.name, command.argument) == (name, argument)
    assert f"/{name}" in HELP_TEXT


async def test_pin_pins_unpin_round_trip(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pin reaches the next request verbatim, /pins lists pins and detected instructions with
    their source, and /unpin takes one out; bad numbers get a clear answer."""
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        assert (await _say(runner, "/pins")).startswith("No standing instructions yet")
        llm.script(Turn(text="Sure."))
        await _say(runner, "Never push to main without a review.")
        assert (await _say(runner, "/pin answer in British English")).startswith("Pinned.")
        llm.script(Turn(text="Colour."))
        await _say(runner, "colour or color?")
        system = _system_of_last_request(llm)
        assert LEDGER_START in system and "(pinned) answer in British English" in system
        assert "Never push to main without a review" in system
        listing = await _say(runner, "/pins")
        lines = listing.splitlines()
        assert lines[1].startswith("1. Never push to main without a review  (from message #")
        assert lines[2] == "2. answer in British English  (pinned)"
        assert (
            await _say(runner, "/unpin 7")
            == "There is no standing instruction number 7; see /pins."
        )
        assert await _say(runner, "/unpin x") == "Use /unpin N with the number /pins shows."
        assert await _say(runner, "/unpin 2") == "Dropped: answer in British English"
        assert (await _say(runner, "/pin")).startswith("Nothing pinned")
        llm.script(Turn(text="Color, then."))
        await _say(runner, "and now?")
        system = _system_of_last_request(llm)
        assert "British English" not in system and "Never push to main" in system
        await runner.stop()


async def test_pins_says_what_an_instruction_replaced(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A superseding instruction is listed with the words of the one it replaced."""
    async with start_runtime(make_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        llm.script(Turn(text="Tabs."), Turn(text="Spaces."))
        await _say(runner, "Always use tabs for indentation.")
        await _say(runner, "Never use tabs for indentation.")
        listing = (await _say(runner, "/pins")).splitlines()
        assert len(listing) == 3
        assert listing[1].endswith("; replaces “Always use tabs for indentation”)")
        assert listing[1].startswith("1. Never use tabs for indentation  (from message #")
        await runner.stop()
