"""Discord slash commands from the one command table, answered through the runner; fence-aware
replies; `/status` as an embed. Real discord.py against the strict FakeDiscord.

Contract: application commands are registered with a bulk overwrite (PUT
/applications/{id}/commands, https://discord.com/developers/docs/interactions/application-commands
#bulk-overwrite-global-application-commands); an invocation is an INTERACTION_CREATE of type 2;
the app acknowledges within three seconds (type 5, DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE) and then
edits the original response (PATCH /webhooks/{application.id}/{token}/messages/@original,
https://discord.com/developers/docs/interactions/receiving-and-responding#responding-to-an-
interaction). Messages hold at most 2,000 characters; embeds follow the embed limits.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.commands import COMMANDS, HELP_TEXT
from gateway.platforms.base import ChatRef
from gateway.platforms.discord import DiscordAdapter
from gateway.platforms.discord_commands import (
    InteractionFacts,
    InteractionReplies,
    inbound_from_interaction,
    status_embed,
)
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.fakes.discord import FakeDiscord, patch_discord
from tests.fakes.discord_interactions import command_problem
from tests.gateway.harness import make_config, start_runtime
from tests.gateway.platform_drivers import wait_until

__all__ = ["patch_discord"]  # the fixture: imported so pytest finds it

FENCE = "```"


@pytest.fixture
async def gateway(
    patch_discord: FakeDiscord,
    llm: FakeLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> AsyncIterator[tuple[FakeDiscord, GatewayRunner]]:
    """Runtime + runner + the Discord adapter; discord.py must log no errors."""
    caplog.set_level(logging.INFO, logger="discord")
    fake = patch_discord
    human = str(fake.human_id)
    discord_cfg = {"allowed_users": [human], "admins": [human], "channels": [str(fake.random_id)]}
    config = make_config(llm, tmp_path / "state.db", gateway={"discord": discord_cfg})
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        adapter = DiscordAdapter(
            token=fake.token,
            channels=[str(fake.random_id)],
            guild_ready_timeout_s=0.05,
            start_timeout_s=5.0,
        )
        runner = GatewayRunner(runtime, [adapter])
        await runner.start()
        try:
            yield fake, runner
        finally:
            await runner.stop()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


async def _response(fake: FakeDiscord, interaction_id: int) -> dict[str, Any]:
    """The interaction's original response, once it no longer shows "thinking…"."""

    def answered() -> bool:
        original = fake.interactions[interaction_id].get("original_id")
        return original is not None and not int(fake.messages[original]["flags"]) & 128

    await wait_until(answered, what=f"the response to interaction {interaction_id}")
    return fake.messages[fake.interactions[interaction_id]["original_id"]]


async def test_slash_commands_are_registered_from_the_command_table(
    gateway: tuple[FakeDiscord, GatewayRunner],
) -> None:
    """At start, one bulk overwrite registers every table command with its summary; an
    argument is an optional string option under its own name."""
    fake, _ = gateway
    call = await fake.wait_rest_call("PUT", f"/applications/{fake.app_id}/commands")
    assert [c["name"] for c in call.body] == [s.name for s in COMMANDS]
    assert [c["description"] for c in call.body] == [s.summary for s in COMMANDS]
    compress = next(c for c in call.body if c["name"] == "compress")
    assert [(o["name"], o["type"], o.get("required", False)) for o in compress["options"]] == [
        ("focus", 3, False)
    ]
    assert command_problem(call.body) is None


async def test_status_is_answered_through_the_runner_as_an_embed(
    gateway: tuple[FakeDiscord, GatewayRunner], llm: FakeLLM
) -> None:
    """/status in a guild channel: deferred at once, then the runner's status as an embed."""
    fake, _ = gateway
    llm.script(Turn(text="noted"))
    await fake.user_says("remember this", channel_id=fake.random_id)
    await llm.wait_requests(1)
    await fake.wait_for(lambda: len(fake.messages) >= 2, what="the reply")
    interaction = await fake.invoke_command(
        "status", channel_id=fake.random_id, user_id=fake.human_id
    )
    response = await _response(fake, interaction)
    assert fake.interactions[interaction]["type"] == 5  # acknowledged with "thinking…"
    embed = response["embeds"][0]
    assert embed["title"].startswith("Session ") and "model test-model" in embed["title"]
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    assert "tokens of 100,000" in fields["Context"]
    assert response["content"] in ("", None)


async def test_help_and_an_argument_reach_the_runner_as_text(
    gateway: tuple[FakeDiscord, GatewayRunner], llm: FakeLLM
) -> None:
    """/help answers with the table's help text; /model NAME in a DM switches (an admin)."""
    fake, runner = gateway
    helped = await fake.invoke_command("help", channel_id=fake.dm_id, user_id=fake.human_id)
    assert (await _response(fake, helped))["content"] == HELP_TEXT
    switched = await fake.invoke_command(
        "model", channel_id=fake.dm_id, user_id=fake.human_id, options={"name": "other-model"}
    )
    assert (await _response(fake, switched))["content"].startswith("Switched to other-model")
    assert llm.requests == []


async def test_a_stranger_is_refused_in_the_interaction(
    gateway: tuple[FakeDiscord, GatewayRunner],
) -> None:
    """Someone not on the allowlist gets the refusal as the command's response."""
    fake, _ = gateway
    interaction = await fake.invoke_command("status", channel_id=fake.dm_id, user_id=4242)
    assert "allowlist" in (await _response(fake, interaction))["content"]


async def test_a_long_code_block_is_split_on_fence_boundaries(
    gateway: tuple[FakeDiscord, GatewayRunner], llm: FakeLLM
) -> None:
    """A reply with a 5,000-character block arrives as messages of at most 2,000 characters,
    each a complete block in the same language, the code intact and in order."""
    fake, _ = gateway
    lines = [f"step_{i:03d} = run(stage={i})" for i in range(200)]
    llm.script(Turn(text="The script:\n" + FENCE + "python\n" + "\n".join(lines) + "\n" + FENCE))
    await fake.user_says("write the script", channel_id=fake.dm_id)
    bot = str(fake.bot_id)

    def replies() -> list[str]:
        mine = [m for m in fake.messages.values() if m["author"]["id"] == bot]
        return [m["content"] for m in sorted(mine, key=lambda m: int(m["id"]))]

    await wait_until(
        lambda: sum(r.count("step_") for r in replies()) == len(lines), what="every code line"
    )
    pieces = replies()
    assert len(pieces) >= 3 and all(len(p) <= 2000 for p in pieces)
    for piece in pieces:
        fence_lines = [line for line in piece.splitlines() if line.startswith(FENCE)]
        assert len(fence_lines) == 2 and fence_lines[0] == FENCE + "python"
    code = [line for p in pieces for line in p.splitlines() if line.startswith("step_")]
    assert code == lines


# ---- pure parts ---------------------------------------------------------------------------


def test_status_text_becomes_an_embed_of_fields() -> None:
    """The first line is the title; `Name: value` lines are fields; other lines the description."""
    embed = status_embed("Session s1 · model m\nContext: 10 tokens\nno colon here\nCompactions: 1")
    assert embed.title == "Session s1 · model m"
    assert [(f.name, f.value) for f in embed.fields] == [
        ("Context", "10 tokens"),
        ("Compactions", "1"),
    ]
    assert embed.description == "no colon here"


def test_a_command_in_a_thread_routes_to_the_thread() -> None:
    """Used in a thread, the command's chat is the parent channel with the thread, and its
    reply goes to the interaction."""
    facts = InteractionFacts(
        channel_id="77", parent_channel_id="70", guild_id="1", user_id="5", user_name="ada"
    )
    spec = next(s for s in COMMANDS if s.name == "compress")
    message = inbound_from_interaction(facts, key="interaction:9", spec=spec, argument=" db ")
    assert message.chat == ChatRef(
        platform="discord", chat_id="70", thread_id="77", reply_to_message_id="interaction:9"
    )
    assert (message.text, message.is_direct, message.user_id) == ("/compress db", False, "5")


def test_pending_interactions_expire_with_their_token() -> None:
    """An interaction token lives 15 minutes: after that, a reply goes to the channel."""
    now = [0.0]
    replies = InteractionReplies(clock=lambda: now[0])

    class _Interaction:
        id = 9

    key = replies.open(_Interaction(), "help")  # type: ignore[arg-type]
    chat = ChatRef(platform="discord", chat_id="1", reply_to_message_id=key)
    assert replies.owns(chat)
    now[0] = 15 * 60 + 1
    assert not replies.owns(chat)
