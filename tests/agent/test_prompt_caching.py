"""Tests for `agent.prompt_caching`: system_and_3 placement, copying, TTL forms and the decision."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.errors import ConfigError
from agent.messages import ChatMessage, content_text
from agent.prompt_caching import (
    apply_anthropic_cache_control,
    cache_marker,
    caching_decision,
    cold_cache_warning,
    count_cache_markers,
)

M5 = {"type": "ephemeral"}
M1H = {"type": "ephemeral", "ttl": "1h"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def _sys(text: str = "You are Hermes.") -> ChatMessage:
    return {"role": "system", "content": text}


def _user(content: Any) -> ChatMessage:
    return {"role": "user", "content": content}


def _asst(content: Any, *, calls: bool = False) -> ChatMessage:
    msg: ChatMessage = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = [copy.deepcopy(CALL)]  # type: ignore[list-item]
    return msg


def _tool(content: Any) -> ChatMessage:
    return {"role": "tool", "content": content, "tool_call_id": "call_1", "name": "f"}


def _marked_indexes(messages: list[ChatMessage]) -> list[int]:
    return [i for i, m in enumerate(messages) if count_cache_markers([m])]


class TestCacheMarker:
    @pytest.mark.parametrize(("ttl", "expected"), [("5m", M5), ("1h", M1H)])
    def test_marker_form_per_ttl(self, ttl: str, expected: dict[str, str]) -> None:
        """5m is the bare ephemeral marker; 1h adds the ttl key."""
        assert cache_marker(ttl) == expected

    @pytest.mark.parametrize("ttl", ["10m", "1H", "", "5 m", "60m"])
    def test_other_ttls_are_rejected(self, ttl: str) -> None:
        """Any TTL other than 5m or 1h is a ValueError, for the marker and for the transform."""
        with pytest.raises(ValueError, match="ttl"):
            cache_marker(ttl)
        with pytest.raises(ValueError, match="ttl"):
            apply_anthropic_cache_control([_user("hi")], ttl=ttl)


class TestPlacement:
    @pytest.mark.parametrize(
        ("message", "expected"),
        [
            (_user("hello"), _user([{"type": "text", "text": "hello", "cache_control": M5}])),
            (
                _user([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
                _user(
                    [
                        {"type": "text", "text": "a"},
                        {"type": "text", "text": "b", "cache_control": M5},
                    ]
                ),
            ),
            (
                _user([{"type": "text", "text": "a"}, {"type": "text", "text": ""}]),
                _user(
                    [
                        {"type": "text", "text": "a", "cache_control": M5},
                        {"type": "text", "text": ""},
                    ]
                ),
            ),
            (
                _user([{"type": "image", "source": {"type": "url", "url": "u"}}]),
                _user(
                    [{"type": "image", "source": {"type": "url", "url": "u"}, "cache_control": M5}]
                ),
            ),
            (_tool("42 degrees"), {**_tool("42 degrees"), "cache_control": M5}),
            (_tool(""), {**_tool(""), "cache_control": M5}),
            (_asst(None, calls=True), {**_asst(None, calls=True), "cache_control": M5}),
            (_asst("", calls=True), {**_asst("", calls=True), "cache_control": M5}),
            (
                _asst("Let me check.", calls=True),
                {**_asst("Let me check.", calls=True), "cache_control": M5},
            ),
            (_asst("done"), _asst([{"type": "text", "text": "done", "cache_control": M5}])),
        ],
        ids=[
            "string",
            "list-last-block",
            "list-skips-trailing-empty-block",
            "image-block",
            "tool-result",
            "tool-result-empty",
            "tool-call-none",
            "tool-call-empty",
            "tool-call-with-text",
            "assistant-text",
        ],
    )
    def test_marker_lands_where_the_provider_accepts_it(
        self, message: ChatMessage, expected: ChatMessage
    ) -> None:
        """Each content shape gets its breakpoint in the one place the wire can carry it."""
        assert apply_anthropic_cache_control([message]) == [expected]

    @pytest.mark.parametrize("empty", [None, "", [], [{"type": "text", "text": ""}]])
    def test_empty_content_moves_the_breakpoint_earlier(self, empty: Any) -> None:
        """An empty message without tool calls is skipped; the window reaches one further back."""
        messages = [_sys(), _user("a"), _asst("b"), _user("c"), _asst(empty)]
        out = apply_anthropic_cache_control(messages)
        assert _marked_indexes(out) == [0, 1, 2, 3]
        assert out[4] == messages[4]

    def test_system_and_last_three_non_system(self) -> None:
        """Breakpoint 1 is the system prompt, then the three newest non-system messages."""
        messages = [_sys()] + [_user(f"u{i}") if i % 2 == 0 else _asst(f"a{i}") for i in range(8)]
        out = apply_anthropic_cache_control(messages)
        assert _marked_indexes(out) == [0, 6, 7, 8]
        assert out[0]["content"] == [
            {"type": "text", "text": "You are Hermes.", "cache_control": M5}
        ]

    def test_without_system_only_three_markers(self) -> None:
        """With no system message only the rolling window of three is spent."""
        out = apply_anthropic_cache_control([_user("a"), _asst("b"), _user("c"), _asst("d")])
        assert _marked_indexes(out) == [1, 2, 3]

    def test_later_system_messages_are_not_marked(self) -> None:
        """Only the first system message holds breakpoint 1; later ones are never marked."""
        messages = [_sys(), _user("a"), _sys("note"), _asst("b")]
        out = apply_anthropic_cache_control(messages)
        assert _marked_indexes(out) == [0, 1, 3]

    def test_empty_system_prompt_gets_no_marker(self) -> None:
        """An empty system prompt cannot carry a marker and does not steal a window slot."""
        out = apply_anthropic_cache_control([_sys(""), _user("a"), _asst("b"), _user("c")])
        assert _marked_indexes(out) == [1, 2, 3]

    def test_one_hour_form_everywhere(self) -> None:
        """The 1h TTL puts the ttl key on every marker, block-level and message-level."""
        messages = [_sys(), _user("q"), _asst(None, calls=True), _tool("r")]
        out = apply_anthropic_cache_control(messages, ttl="1h")
        assert out[0]["content"][0]["cache_control"] == M1H  # type: ignore[index]
        assert out[1]["content"][0]["cache_control"] == M1H  # type: ignore[index]
        assert out[2]["cache_control"] == M1H
        assert out[3]["cache_control"] == M1H

    def test_stale_markers_are_replaced(self) -> None:
        """Markers from an earlier pass are dropped, so a second pass still yields at most four."""
        messages = [_sys()] + [_user(f"u{i}") for i in range(6)]
        once = apply_anthropic_cache_control(messages)
        twice = apply_anthropic_cache_control(once + [_asst("new"), _tool("x")])
        assert count_cache_markers(twice) == 4
        assert _marked_indexes(twice) == [0, 6, 7, 8]

    def test_empty_input(self) -> None:
        """No messages in, no messages out."""
        assert apply_anthropic_cache_control([]) == []


class TestCopying:
    def test_callers_list_and_dicts_are_untouched(self) -> None:
        """The caller's messages are equal before and after, and share no dict with the copy."""
        system = _sys()
        system["_id"], system["_persisted"] = 1, True
        messages: list[ChatMessage] = [
            system,
            _user([{"type": "text", "text": "a"}]),
            _asst(None, calls=True),
            _tool("r"),
            _user("b"),
        ]
        before = copy.deepcopy(messages)
        out = apply_anthropic_cache_control(messages)
        assert messages == before
        assert count_cache_markers(messages) == 0
        assert all(o is not m for o, m in zip(out, messages, strict=True))
        assert out[1]["content"] is not messages[1]["content"]
        assert out[2]["tool_calls"] is not messages[2]["tool_calls"]

    def test_metadata_keys_are_preserved(self) -> None:
        """`_id`, `_persisted`, `_kind` and `_created_at` survive in the copy."""
        meta = {"_id": 7, "_persisted": True, "_kind": "summary", "_created_at": 1.5}
        message = {**_user("s"), **meta}
        out = apply_anthropic_cache_control([message])  # type: ignore[list-item]
        assert {k: out[0][k] for k in meta} == meta  # type: ignore[literal-required]


class TestCachingDecision:
    @pytest.mark.parametrize(
        ("model", "provider", "base_url", "enabled", "ttl", "line"),
        [
            (
                "anthropic/claude-sonnet-4",
                "openrouter",
                None,
                True,
                "5m",
                "💾 Prompt caching: ENABLED (Claude via OpenRouter, 5m TTL)",
            ),
            (
                "claude-opus-4",
                "anthropic",
                None,
                True,
                "1h",
                "💾 Prompt caching: ENABLED (Claude via Anthropic, 1h TTL)",
            ),
            (
                "anthropic/Claude-Haiku",
                "custom",
                "https://openrouter.ai/api/v1",
                True,
                "5m",
                "💾 Prompt caching: ENABLED (Claude via OpenRouter, 5m TTL)",
            ),
            (
                "gpt-4o",
                "openai",
                None,
                True,
                "5m",
                "💾 Prompt caching: off (model gpt-4o is not a Claude model)",
            ),
            (
                "gpt-4o",
                "openrouter",
                None,
                True,
                "5m",
                "💾 Prompt caching: off (model gpt-4o is not a Claude model)",
            ),
            (
                "claude-sonnet-4",
                "custom",
                "http://127.0.0.1:8000/v1",
                True,
                "5m",
                "💾 Prompt caching: off (route custom does not accept cache_control)",
            ),
            (
                "claude-sonnet-4",
                "custom",
                "https://notopenrouter.ai.example.com/v1",
                True,
                "5m",
                "💾 Prompt caching: off (route custom does not accept cache_control)",
            ),
            (
                "claude-sonnet-4",
                "openai",
                None,
                True,
                "5m",
                "💾 Prompt caching: off (route openai does not accept cache_control)",
            ),
            (
                "claude-sonnet-4",
                "anthropic",
                None,
                False,
                "5m",
                "💾 Prompt caching: off (disabled in config)",
            ),
        ],
        ids=[
            "openrouter-provider",
            "anthropic-1h",
            "openrouter-by-base-url",
            "gpt-on-openai",
            "gpt-on-openrouter",
            "claude-on-local-server",
            "lookalike-host",
            "claude-on-openai",
            "disabled",
        ],
    )
    def test_status_line(
        self, model: str, provider: str, base_url: str | None, enabled: bool, ttl: str, line: str
    ) -> None:
        """Caching is on only for Claude on Anthropic or OpenRouter, and the line says why."""
        decision = caching_decision(model, provider, base_url, enabled=enabled, ttl=ttl)
        assert decision.status_line == line
        assert decision.enabled is ("ENABLED" in line)
        assert decision.ttl == ttl
        assert decision.reason in line

    @pytest.mark.parametrize("ttl", ["10m", "", "1d"])
    def test_bad_ttl_is_a_config_error(self, ttl: str) -> None:
        """A TTL other than 5m or 1h is a config error naming the key, even when caching is off."""
        with pytest.raises(ConfigError) as info:
            caching_decision("claude-x", "anthropic", None, enabled=False, ttl=ttl)
        assert info.value.key == "prompt_caching.cache_ttl"


@pytest.mark.parametrize(
    ("old", "new", "warns"), [("claude-a", "claude-b", True), ("claude-a", "claude-a", False)]
)
def test_cold_cache_warning(old: str, new: str, warns: bool) -> None:
    """A model switch warns that the cache starts cold; staying on the same model does not."""
    warning = cold_cache_warning(old, new)
    assert (warning is not None) is warns
    if warning is not None:
        assert "cold" in warning and old in warning and new in warning


_text = st.text(alphabet="ab ", max_size=3)
_blocks = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}), max_size=3)
_content = st.one_of(st.none(), _text, _blocks)
_message = st.one_of(
    st.builds(lambda c: {"role": "system", "content": c}, _content),
    st.builds(lambda c: {"role": "user", "content": c, "_id": 1}, _content),
    st.builds(lambda c, k: _asst(c, calls=k), _content, st.booleans()),
    st.builds(_tool, _content),
)


def _is_eligible(msg: ChatMessage) -> bool:
    """Test oracle: a message can carry a breakpoint (tool result, tool calls or some text)."""
    if msg["role"] == "tool" or msg.get("tool_calls"):
        return True
    content = msg.get("content")
    if isinstance(content, list):
        return any(block["text"] for block in content)
    return bool(content)


@settings(max_examples=300, deadline=None)
@given(messages=st.lists(_message, max_size=12), ttl=st.sampled_from(["5m", "1h"]))
def test_random_transcripts_keep_the_invariants(messages: list[ChatMessage], ttl: str) -> None:
    """For any transcript: at most 4 markers, input unchanged, only system + last three eligible."""
    before = copy.deepcopy(messages)
    out = apply_anthropic_cache_control(messages, ttl=ttl)
    assert messages == before
    assert count_cache_markers(out) <= 4
    first_system = next((i for i, m in enumerate(messages) if m["role"] == "system"), None)
    head = (
        [first_system] if first_system is not None and _is_eligible(messages[first_system]) else []
    )
    window = [i for i, m in enumerate(messages) if m["role"] != "system" and _is_eligible(m)][-3:]
    assert _marked_indexes(out) == sorted(head + window)
    assert all(count_cache_markers([out[i]]) == 1 for i in head + window)
    assert [_without_content(m) for m in out] == [_without_content(m) for m in messages]
    assert [content_text(m) for m in out] == [content_text(m) for m in messages]


def _without_content(msg: ChatMessage) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k not in ("content", "cache_control")}
