"""Cache breakpoints on the wire: real anthropic and openai SDKs send marked messages to FakeLLM."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from agent.config import HermesConfig
from agent.messages import ChatMessage, ToolCall
from agent.pricing import billed_token_equivalent, price_for
from agent.prompt_caching import apply_anthropic_cache_control, caching_decision
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import Provider, ProviderReply, ProviderRequest, ProviderSettings, Usage
from agent.providers.openai_chat import OpenAIChatProvider
from sim.llm_server import FakeLLM, ManualClock

CLAUDE = "claude-test-1"
OPENROUTER_CLAUDE = "anthropic/claude-test-1"
GPT = "gpt-test-1"
SYSTEM = "You are Hermes, a careful assistant. " * 8
M5 = {"type": "ephemeral"}
M1H = {"type": "ephemeral", "ttl": "1h"}
CALL: ToolCall = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
}
CALL_TIMEOUT_S = 10.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLM]:
    async with FakeLLM(clock=ManualClock()) as server:
        yield server


def _settings(fake: FakeLLM, provider: str, model: str) -> ProviderSettings:
    base = fake.anthropic_base_url if provider == "anthropic" else fake.openai_base_url
    return ProviderSettings(
        provider=provider, model=model, base_url=base, api_key="sk-test", timeout_s=5, max_retries=0
    )


def _build(fake: FakeLLM, route: str) -> Provider:
    """A real provider for a route: native Anthropic, or the openai SDK against OpenRouter."""
    if route == "anthropic":
        return AnthropicProvider(_settings(fake, "anthropic", CLAUDE))
    settings = _settings(fake, "openrouter", OPENROUTER_CLAUDE)
    return OpenAIChatProvider(settings, accepts_cache_control=True)


@pytest.fixture
async def anthropic_route(fake: FakeLLM) -> AsyncIterator[Provider]:
    provider = _build(fake, "anthropic")
    yield provider
    await provider.aclose()


@pytest.fixture
async def openrouter_route(fake: FakeLLM) -> AsyncIterator[Provider]:
    provider = _build(fake, "openrouter")
    yield provider
    await provider.aclose()


async def _send(
    fake: FakeLLM,
    provider: Provider,
    model: str,
    messages: Sequence[ChatMessage],
    ttl: str = "5m",
    *,
    blocks_only: bool = False,
) -> tuple[dict[str, Any], ProviderReply]:
    """Mark `messages`, send them through the real SDK, return the recorded body and the reply."""
    marked = apply_anthropic_cache_control(messages, ttl=ttl, blocks_only=blocks_only)
    request = ProviderRequest(model=model, messages=marked, max_tokens=64)
    async with asyncio.timeout(CALL_TIMEOUT_S):
        reply = await provider.complete(request)
    body = fake.requests[-1].json
    assert body is not None
    return body, reply


def _markers(value: Any) -> list[dict[str, Any]]:
    """Every cache_control value anywhere in a JSON body, in document order."""
    if isinstance(value, dict):
        found = [value["cache_control"]] if "cache_control" in value else []
        return found + [m for k, v in value.items() if k != "cache_control" for m in _markers(v)]
    if isinstance(value, list):
        return [m for item in value for m in _markers(item)]
    return []


def _sys() -> ChatMessage:
    return {"role": "system", "content": SYSTEM, "_id": 1, "_persisted": True}


def _user(content: Any) -> ChatMessage:
    return {"role": "user", "content": content, "_kind": "normal"}


def _asst(content: Any, *, calls: bool = False) -> ChatMessage:
    msg: ChatMessage = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = [CALL]
    return msg


def _tool(text: str) -> ChatMessage:
    return {"role": "tool", "content": text, "tool_call_id": "call_1", "name": "get_weather"}


def _text(text: str, marker: dict[str, str] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if marker is not None:
        block["cache_control"] = marker
    return block


TOOL_USE = {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}


class TestAnthropicRoute:
    async def test_string_messages(self, fake: FakeLLM, anthropic_route: Provider) -> None:
        """The system prompt and the last three string messages become marked text blocks."""
        history = [_sys(), _user("q1"), _asst("a1"), _user("q2"), _asst("a2"), _user("q3")]
        body, _ = await _send(fake, anthropic_route, CLAUDE, history)
        assert body["system"] == [_text(SYSTEM, M5)]
        assert body["messages"] == [
            {"role": "user", "content": [_text("q1")]},
            {"role": "assistant", "content": [_text("a1")]},
            {"role": "user", "content": [_text("q2", M5)]},
            {"role": "assistant", "content": [_text("a2", M5)]},
            {"role": "user", "content": [_text("q3", M5)]},
        ]

    async def test_list_content(self, fake: FakeLLM, anthropic_route: Provider) -> None:
        """List content is marked on its last block; an empty trailing block is not sent."""
        blocks = [_text("part one"), _text("part two"), _text("")]
        body, _ = await _send(fake, anthropic_route, CLAUDE, [_sys(), _user(blocks)])
        assert body["messages"] == [
            {"role": "user", "content": [_text("part one"), _text("part two", M5)]}
        ]

    @pytest.mark.parametrize("call_text", [None, "", "Let me check."])
    async def test_tool_call_and_result(
        self, fake: FakeLLM, anthropic_route: Provider, call_text: str | None
    ) -> None:
        """The tool call's marker lands on its tool_use block and the result's on tool_result."""
        history = [_sys(), _user("weather?"), _asst(call_text, calls=True), _tool("12 C")]
        body, _ = await _send(fake, anthropic_route, CLAUDE, history)
        text = [_text(call_text)] if call_text else []
        assert body["messages"] == [
            {"role": "user", "content": [_text("weather?", M5)]},
            {"role": "assistant", "content": [*text, {**TOOL_USE, "cache_control": M5}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_1",
                        "content": "12 C",
                        "cache_control": M5,
                    }
                ],
            },
        ]

    async def test_one_hour_form(self, fake: FakeLLM, anthropic_route: Provider) -> None:
        """With the 1h TTL every marker on the wire carries ttl 1h, and the fake writes 1h cache."""
        history = [_sys(), _user("weather?"), _asst(None, calls=True), _tool("12 C"), _user("ok")]
        body, reply = await _send(fake, anthropic_route, CLAUDE, history, ttl="1h")
        assert _markers(body) == [M1H] * 4
        assert reply.usage.cache_write_tokens > 0

    async def test_never_more_than_four(self, fake: FakeLLM, anthropic_route: Provider) -> None:
        """A long transcript, re-marked over stale markers, still sends exactly four breakpoints."""
        history: list[ChatMessage] = [_sys()]
        for turn in range(8):
            history += [_user(f"q{turn}"), _asst(f"thinking {turn}", calls=True), _tool(f"r{turn}")]
            history += [_asst(f"answer {turn}")]
        stale = apply_anthropic_cache_control(history[:-5])
        body, _ = await _send(fake, anthropic_route, CLAUDE, stale + history[-5:])
        assert len(_markers(body)) == 4
        assert [m["role"] for m in body["messages"][-2:]] == ["user", "assistant"]


class TestOpenRouterRoute:
    async def test_string_and_list_messages(
        self, fake: FakeLLM, openrouter_route: Provider
    ) -> None:
        """Strings become marked one-block lists; list content is marked on its last block."""
        history = [_sys(), _user("q1"), _asst("a1"), _user("q2"), _user([_text("x"), _text("y")])]
        body, _ = await _send(fake, openrouter_route, OPENROUTER_CLAUDE, history)
        assert body["messages"] == [
            {"role": "system", "content": [_text(SYSTEM, M5)]},
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": [_text("a1", M5)]},
            {"role": "user", "content": [_text("q2", M5)]},
            {"role": "user", "content": [_text("x"), _text("y", M5)]},
        ]

    async def test_tool_call_and_result(self, fake: FakeLLM, openrouter_route: Provider) -> None:
        """The tool result's text block is marked; a tool-call message with text is marked on it."""
        history = [_sys(), _user("weather?"), _asst("Let me check.", calls=True), _tool("12 C")]
        body, _ = await _send(fake, openrouter_route, OPENROUTER_CLAUDE, history)
        assert body["messages"][1:] == [
            {"role": "user", "content": [_text("weather?", M5)]},
            {
                "role": "assistant",
                "content": [_text("Let me check.", M5)],
                "tool_calls": [CALL],
            },
            {"role": "tool", "content": [_text("12 C", M5)], "tool_call_id": "call_1"},
        ]

    async def test_textless_tool_call_carries_no_marker(
        self, fake: FakeLLM, openrouter_route: Provider
    ) -> None:
        """On the OpenAI wire a tool-call message without text has no block to carry a marker."""
        history = [_sys(), _user("weather?"), _asst(None, calls=True), _tool("12 C")]
        body, _ = await _send(fake, openrouter_route, OPENROUTER_CLAUDE, history)
        assert body["messages"][2] == {"role": "assistant", "content": None, "tool_calls": [CALL]}
        assert len(_markers(body)) == 3
        assert all("cache_control" not in m for m in body["messages"])

    async def test_blocks_only_moves_the_breakpoint_off_a_textless_tool_call(
        self, fake: FakeLLM, openrouter_route: Provider
    ) -> None:
        """As the runtime sends on OpenRouter: the slot goes to the next earlier message."""
        history = [_sys(), _user("weather?"), _asst(None, calls=True), _tool("12 C")]
        body, _ = await _send(fake, openrouter_route, OPENROUTER_CLAUDE, history, blocks_only=True)
        assert len(_markers(body)) == 3  # system, the user's question, the tool result
        assert body["messages"][1] == {"role": "user", "content": [_text("weather?", M5)]}
        history = [_sys(), _user("a"), _asst("b"), _user("weather?"), _asst(None, calls=True)]
        history.append(_tool("12 C"))  # without blocks_only one of three slots would be lost
        body, _ = await _send(fake, openrouter_route, OPENROUTER_CLAUDE, history, blocks_only=True)
        assert len(_markers(body)) == 4

    async def test_never_more_than_four(self, fake: FakeLLM, openrouter_route: Provider) -> None:
        """A long transcript sends at most four markers, none at message level."""
        history: list[ChatMessage] = [_sys()]
        for turn in range(6):
            history += [_user(f"q{turn}"), _asst(f"t{turn}", calls=True), _tool(f"r{turn}")]
        body, _ = await _send(fake, openrouter_route, OPENROUTER_CLAUDE, history, ttl="1h")
        assert _markers(body) == [M1H] * 4
        assert all("cache_control" not in m for m in body["messages"])


@pytest.mark.parametrize(
    ("provider", "model"), [("openai", GPT), ("openrouter", GPT), ("custom", "claude-test-1")]
)
async def test_nothing_on_routes_without_caching(fake: FakeLLM, provider: str, model: str) -> None:
    """Off-routes get no markers: the decision is off and the provider strips any that slip in."""
    decision = caching_decision(model, provider, None, enabled=True, ttl="5m")
    assert not decision.enabled
    settings = _settings(fake, provider, model)
    client = OpenAIChatProvider(settings, accepts_cache_control=provider == "openrouter")
    history = [_sys(), _user("weather?"), _asst("Let me check.", calls=True), _tool("12 C")]
    try:
        if provider == "openrouter":  # accepts markers, so only the decision keeps them off
            request = ProviderRequest(model=model, messages=history, max_tokens=64)
            async with asyncio.timeout(CALL_TIMEOUT_S):
                await client.complete(request)
            body = fake.requests[-1].json
        else:
            body, _ = await _send(fake, client, model, history)
    finally:
        await client.aclose()
    assert "cache_control" not in json.dumps(body)


async def _converse(
    fake: FakeLLM, provider: Provider, model: str, turns: int, *, idle_s: float = 30.0
) -> list[Usage]:
    """Run `turns` user turns with a growing history; each turn idles `idle_s` on the fake clock."""
    history: list[ChatMessage] = [_sys()]
    usages: list[Usage] = []
    for turn in range(turns):
        history.append(_user(f"Question {turn}: " + "tell me more about caching. " * 6))
        _, reply = await _send(fake, provider, model, history)
        history.append(reply.message)
        usages.append(reply.usage)
        fake.clock.advance(idle_s)  # type: ignore[attr-defined]
    return usages


@pytest.mark.parametrize(
    ("route", "model"), [("anthropic", CLAUDE), ("openrouter", OPENROUTER_CLAUDE)]
)
async def test_cache_reads_grow_turn_over_turn(fake: FakeLLM, route: str, model: str) -> None:
    """The first turn reads nothing; every later turn reads more of the prefix than the last."""
    provider = _build(fake, route)
    try:
        usages = await _converse(fake, provider, model, turns=6)
    finally:
        await provider.aclose()
    reads = [u.cache_read_tokens for u in usages]
    assert reads[0] == 0
    assert all(later > earlier for earlier, later in zip(reads, reads[1:], strict=False)), reads


@pytest.mark.parametrize(
    ("ttl", "idle_s", "warm"),
    [("5m", 299, True), ("5m", 301, False), ("1h", 301, True), ("1h", 3601, False)],
)
async def test_ttl_decides_whether_an_idle_gap_keeps_the_cache(
    fake: FakeLLM, anthropic_route: Provider, ttl: str, idle_s: float, warm: bool
) -> None:
    """After an idle gap shorter than the TTL the prefix is read; after a longer one it is cold."""
    history = [_sys(), _user("first question")]
    _, reply = await _send(fake, anthropic_route, CLAUDE, history, ttl=ttl)
    fake.clock.advance(idle_s)  # type: ignore[attr-defined]
    history += [reply.message, _user("second question")]
    _, reply = await _send(fake, anthropic_route, CLAUDE, history, ttl=ttl)
    assert (reply.usage.cache_read_tokens > 0) is warm
    assert (reply.usage.cache_write_tokens > 0) is True


async def test_system_prompt_stays_cached_across_a_compaction(
    fake: FakeLLM, anthropic_route: Provider
) -> None:
    """After the middle becomes a summary, the unchanged system prompt is still read from cache."""
    history: list[ChatMessage] = [_sys()]
    for turn in range(4):
        history.append(_user(f"step {turn} " + "details " * 20))
        _, reply = await _send(fake, anthropic_route, CLAUDE, history)
        history.append(reply.message)
    before = reply.usage.cache_read_tokens
    summary: ChatMessage = {
        "role": "user",
        "content": "[CONTEXT COMPACTION] summary",
        "_kind": "summary",
    }
    compacted = [history[0], summary, _asst("Understood."), _user("continue")]
    _, after = await _send(fake, anthropic_route, CLAUDE, compacted)
    system_tokens = (len(SYSTEM) + 3) // 4
    assert after.usage.cache_read_tokens == system_tokens
    assert 0 < after.usage.cache_read_tokens < before


async def test_fifty_turns_cost_far_less_with_caching(fake: FakeLLM) -> None:
    """Over 50 turns the cached prompt costs well under half of the same prompts at full price."""
    price = price_for(CLAUDE.replace("test", "sonnet"), HermesConfig().pricing)
    assert price is not None
    provider = _build(fake, "anthropic")
    try:
        usages = await _converse(fake, provider, CLAUDE, turns=50)
    finally:
        await provider.aclose()
    cached = sum(billed_token_equivalent(u, price) for u in usages)
    uncached = sum(u.prompt_tokens for u in usages)
    saving = 1 - cached / uncached
    assert saving > 0.5, f"saving {saving:.1%}: {cached:.0f} vs {uncached} token equivalents"
