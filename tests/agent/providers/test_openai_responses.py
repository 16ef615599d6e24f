"""OpenAIResponsesProvider with the real openai SDK against FakeLLM's Responses wire on loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agent.codex.native_compaction import CODEX_BASE_URL, OPENAI_BASE_URL
from agent.errors import BadRequest, ContextTooLong, ProviderAuthError
from agent.messages import (
    ChatMessage,
    assistant_message,
    system_message,
    tool_message,
    user_message,
)
from agent.providers._responses_convert import messages_to_input
from agent.providers.base import ProviderRequest, ProviderSettings, ToolSpec
from agent.providers.openai_responses import OpenAIResponsesProvider
from sim.llm_server import FakeLLM, ToolCallSpec, Turn

RELAY_URL = "https://relay.example.net/v1"
OPENROUTER_URL = "https://openrouter.ai/api/v1"
BIG_TRIGGER = 1_000_000

Factory = Callable[..., OpenAIResponsesProvider]


@pytest.fixture
async def responses_fake() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


@pytest.fixture
async def make_provider(responses_fake: FakeLLM) -> AsyncIterator[Factory]:
    """Build providers whose public base URL is routed to the fake; closed after the test."""
    built: list[OpenAIResponsesProvider] = []

    def make(
        *,
        provider: str = "openai",
        base_url: str | None = OPENAI_BASE_URL,
        model: str = "gpt-5.6",
        native: bool = True,
        threshold: int = 200_000,
        trigger: int = BIG_TRIGGER,
        key: str = "sk-test",
    ) -> OpenAIResponsesProvider:
        public = base_url or (CODEX_BASE_URL if provider == "openai-codex" else OPENAI_BASE_URL)
        settings = ProviderSettings(
            provider=provider,
            model=model,
            base_url=base_url,
            api_key=key,
            timeout_s=5.0,
            max_retries=0,
            api_mode="responses",
        )
        made = OpenAIResponsesProvider(
            settings,
            native_compaction=native,
            compact_threshold=threshold,
            local_trigger_tokens=lambda: trigger,
            http_client=responses_fake.http_client_for(public),
        )
        built.append(made)
        return made

    yield make
    for made in built:
        await made.aclose()


def _request(messages: list[ChatMessage], model: str = "gpt-5.6", **kw: Any) -> ProviderRequest:
    return ProviderRequest(model=model, messages=messages, **kw)


def _convo(*texts: str) -> list[ChatMessage]:
    return [system_message("be brief"), *(user_message(t) for t in texts)]


class TestNativeCompactionField:
    @pytest.mark.parametrize(
        ("provider", "base_url", "model", "expected"),
        [
            ("openai", OPENAI_BASE_URL, "gpt-5.6", True),
            ("openai", None, "gpt-5.6-2026-08-01", True),
            ("openai-codex", None, "gpt-5.6", True),
            ("openai-codex", CODEX_BASE_URL, "gpt-5.6-codex", True),
            ("openai", OPENAI_BASE_URL, "gpt-5.5", False),
            ("openai", OPENAI_BASE_URL, "gpt-5.2", False),
            ("openai-codex", None, "gpt-5.1-codex", False),
            ("openai", OPENAI_BASE_URL, "gpt-5.61", False),
            ("openai", RELAY_URL, "gpt-5.6", False),
            ("openai", OPENROUTER_URL, "gpt-5.6", False),
        ],
    )
    async def test_field_sent_only_for_eligible_model_and_route(
        self,
        responses_fake: FakeLLM,
        make_provider: Factory,
        provider: str,
        base_url: str | None,
        model: str,
        expected: bool,
    ) -> None:
        """`context_management` reaches the wire only for gpt-5.6 on api.openai.com or Codex."""
        made = make_provider(provider=provider, base_url=base_url, model=model)
        await made.complete(_request(_convo("hi"), model=model))
        (call,) = await responses_fake.wait_requests(1)
        assert ("context_management" in call.json) is expected

    async def test_field_absent_when_not_opted_in(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """With compression.codex_responses_native false the field is never sent."""
        made = make_provider(native=False)
        await made.complete(_request(_convo("hi")))
        (call,) = await responses_fake.wait_requests(1)
        assert "context_management" not in call.json

    @pytest.mark.parametrize(
        ("configured", "trigger", "expected"),
        [(200_000, 100_000, 91_808), (50_000, 100_000, 50_000), (200_000, 20_000, 16_384)],
    )
    async def test_threshold_clamped_below_local_trigger(
        self,
        responses_fake: FakeLLM,
        make_provider: Factory,
        configured: int,
        trigger: int,
        expected: int,
    ) -> None:
        """The server threshold is min(configured, trigger - 8192), floored at 16,384."""
        made = make_provider(threshold=configured, trigger=trigger)
        await made.complete(_request(_convo("hi")))
        (call,) = await responses_fake.wait_requests(1)
        assert call.json["context_management"] == [
            {"type": "compaction", "compact_threshold": expected}
        ]

    async def test_model_switch_stops_the_field(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """The gate is re-checked per request: switching to gpt-5.5 stops the field at once."""
        made = make_provider()
        await made.complete(_request(_convo("one")))
        await made.complete(_request(_convo("two"), model="gpt-5.5"))
        first, second = await responses_fake.wait_requests(2)
        assert "context_management" in first.json
        assert "context_management" not in second.json


class TestCompactionReplay:
    async def test_compaction_item_captured_and_replayed_in_place_of_history(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """The compaction item rides on the reply and replaces the pruned history next time."""
        made = make_provider()
        history = _convo("first question")
        responses_fake.script(Turn(text="first answer", compaction=True))
        reply = await made.complete(_request(history))
        assert reply.raw["native_compaction"] is True
        items = reply.message["_replay_items"]  # type: ignore[typeddict-item]
        assert [i["type"] for i in items] == ["compaction"]
        assert reply.message["_replay_endpoint"] == "api.openai.com"  # type: ignore[typeddict-item]

        await made.complete(_request([*history, reply.message, user_message("second")]))
        second = (await responses_fake.wait_requests(2))[1].json
        assert second["instructions"] == "be brief"
        assert [i["type"] for i in second["input"]] == ["compaction", "message", "message"]
        assert second["input"][0]["encrypted_content"] == items[0]["encrypted_content"]
        assert "first question" not in json.dumps(second["input"])
        assert second["input"][1] == {
            "type": "message",
            "role": "assistant",
            "content": "first answer",
        }

    async def test_server_compacts_when_input_crosses_threshold(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """Past the clamped threshold the (emulated) server returns a compaction item."""
        made = make_provider(threshold=16_384, trigger=BIG_TRIGGER)
        reply = await made.complete(_request(_convo("x" * 70_000)))
        assert reply.raw["native_compaction"] is True
        assert reply.usage.prompt_tokens > 16_384

    async def test_reasoning_items_replayed_before_their_message(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """Encrypted reasoning is requested, kept and sent back ahead of the assistant text."""
        made = make_provider(native=False, model="gpt-5.5")
        responses_fake.script(Turn(text="thought it through", reasoning=True))
        history = _convo("q")
        reply = await made.complete(_request(history, model="gpt-5.5"))
        await made.complete(
            _request([*history, reply.message, user_message("q2")], model="gpt-5.5")
        )
        first, second = await responses_fake.wait_requests(2)
        assert first.json["include"] == ["reasoning.encrypted_content"]
        kinds = [(i["type"], i.get("role")) for i in second.json["input"]]
        assert kinds == [
            ("message", "user"),
            ("reasoning", None),
            ("message", "assistant"),
            ("message", "user"),
        ]

    async def test_cross_endpoint_checkpoints_dropped(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """Items issued by api.openai.com are not replayed to the Codex backend; full history is."""
        direct = make_provider()
        responses_fake.script(Turn(text="a1", compaction=True, reasoning=True))
        history = _convo("q1")
        reply = await direct.complete(_request(history))
        codex = make_provider(provider="openai-codex", base_url=None, key="oauth-token")
        follow_up = await codex.complete(_request([*history, reply.message, user_message("q2")]))
        assert follow_up.message["content"] == "echo: q2"
        call = (await responses_fake.wait_requests(2))[1]
        assert call.host == "chatgpt.com"
        assert call.path == "/backend-api/codex/responses"
        sent = call.json["input"]
        assert [i["type"] for i in sent] == ["message", "message", "message"]
        assert sent[0]["content"][0]["text"] == "q1"


class TestRejection:
    async def test_rejection_retried_without_field_and_disabled_for_session(
        self, make_provider: Factory
    ) -> None:
        """A structured 400 naming context_management: retry once without, then never send it."""
        async with FakeLLM(reject_context_management=True) as strict:
            settings = ProviderSettings(
                provider="openai",
                model="gpt-5.6",
                base_url=OPENAI_BASE_URL,
                api_key="sk-test",
                timeout_s=5.0,
                max_retries=0,
                api_mode="responses",
            )
            made = OpenAIResponsesProvider(
                settings,
                native_compaction=True,
                http_client=strict.http_client_for(OPENAI_BASE_URL),
            )
            try:
                reply = await made.complete(_request(_convo("hi")))
                await made.complete(_request(_convo("again")))
            finally:
                await made.aclose()
            calls = await strict.wait_requests(3)
        assert reply.message["content"] == "echo: hi"
        assert ["context_management" in c.json for c in calls] == [True, False, False]
        assert made.native_compaction_disabled

    async def test_unrelated_bad_request_is_not_retried(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """Only a rejection of the field itself disables native compaction."""
        made = make_provider()
        responses_fake.script(Turn(error=(400, "invalid_request_error", "bad tool schema")))
        with pytest.raises(BadRequest):
            await made.complete(_request(_convo("hi")))
        assert len(responses_fake.requests) == 1
        assert not made.native_compaction_disabled

    async def test_http_500_is_no_structured_rejection(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """A 500 mentioning compaction stays a transient failure; the field stays enabled."""
        made = make_provider()
        responses_fake.script(Turn(error=(500, "server_error", "compaction crashed")))
        with pytest.raises(Exception) as info:
            await made.complete(_request(_convo("hi")))
        assert type(info.value).__name__ == "ProviderUnavailable"
        assert not made.native_compaction_disabled


class TestWire:
    async def test_tool_call_round_trip(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """function_call items become tool_calls; results go back as function_call_output."""
        made = make_provider(native=False, model="gpt-4.1")
        tool = ToolSpec(name="get_weather", description="weather", parameters={"type": "object"})
        responses_fake.script(
            Turn(
                tool_calls=[ToolCallSpec(name="get_weather", arguments='{"city":"Oslo"}', id="c1")]
            )
        )
        history = _convo("weather?")
        reply = await made.complete(_request(history, model="gpt-4.1", tools=(tool,)))
        assert reply.stop_reason == "tool_use"
        assert reply.message["tool_calls"] == [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
            }
        ]
        follow = [*history, reply.message, tool_message("c1", "get_weather", "sunny")]
        final = await made.complete(_request(follow, model="gpt-4.1", tools=(tool,)))
        assert final.stop_reason == "end"
        first, second = await responses_fake.wait_requests(2)
        assert first.json["tools"] == [
            {
                "type": "function",
                "name": "get_weather",
                "description": "weather",
                "parameters": {"type": "object"},
            }
        ]
        assert second.json["input"][1:] == [
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "get_weather",
                "arguments": '{"city":"Oslo"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ]

    async def test_streaming_deltas_in_order(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """With on_text the call streams; deltas arrive in order and join to the final text."""
        made = make_provider(native=False)
        responses_fake.script(Turn(text="the quick brown fox"))
        deltas: list[str] = []

        async def on_text(delta: str) -> None:
            deltas.append(delta)

        reply = await made.complete(_request(_convo("go")), on_text=on_text)
        assert deltas == ["the ", "quick ", "brown ", "fox"]
        assert reply.message["content"] == "the quick brown fox"
        assert (await responses_fake.wait_requests(1))[0].json["stream"] is True

    async def test_usage_splits_cached_tokens(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """input_tokens includes cached_tokens; Usage reports them apart, prompt total intact."""
        made = make_provider(native=False)
        history = _convo("a" * 400)
        first = await made.complete(_request(history))
        second = await made.complete(_request([*history, first.message, user_message("b")]))
        assert len(responses_fake.requests) == 2
        assert first.usage.cache_read_tokens == 0
        assert second.usage.cache_read_tokens == 2 + 100  # instructions "be brief" + 400 chars
        assert (
            second.usage.prompt_tokens == second.usage.input_tokens + second.usage.cache_read_tokens
        )
        assert second.usage.output_tokens > 0

    async def test_store_false_and_no_previous_response_id(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """Every request is stateless even if `extra` tries otherwise."""
        made = make_provider(native=False)
        extra = {"previous_response_id": "resp_1", "store": True, "metadata": {"k": "v"}}
        await made.complete(_request(_convo("hi"), extra=extra))
        (call,) = await responses_fake.wait_requests(1)
        assert call.json["store"] is False
        assert "previous_response_id" not in call.json
        assert call.json["metadata"] == {"k": "v"}

    async def test_codex_route_streams_with_oauth_token_and_account_header(
        self, responses_fake: FakeLLM, make_provider: Factory
    ) -> None:
        """Codex OAuth: default backend URL, bearer token, account id header, always streamed."""
        token = _jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct_42"}})
        made = make_provider(provider="openai-codex", base_url=None, key=token, native=False)
        reply = await made.complete(_request(_convo("hi")))
        assert reply.message["content"] == "echo: hi"
        (call,) = await responses_fake.wait_requests(1)
        assert call.headers["authorization"] == f"Bearer {token}"
        assert call.headers["chatgpt-account-id"] == "acct_42"
        assert call.json["stream"] is True
        assert "max_output_tokens" not in call.json

    @pytest.mark.parametrize(
        ("status", "kind", "message", "error"),
        [
            (401, "invalid_request_error", "bad key", ProviderAuthError),
            (400, "invalid_request_error", "maximum context length exceeded", ContextTooLong),
        ],
    )
    async def test_errors_mapped(
        self,
        responses_fake: FakeLLM,
        make_provider: Factory,
        status: int,
        kind: str,
        message: str,
        error: type[Exception],
    ) -> None:
        """SDK status errors leave the provider as agent.errors kinds."""
        made = make_provider(native=False)
        responses_fake.script(Turn(error=(status, kind, message)))
        with pytest.raises(error):
            await made.complete(_request(_convo("hi")))


class TestConvert:
    def test_foreign_checkpoint_does_not_prune(self) -> None:
        """A compaction item from another issuer neither replays nor hides older history."""
        reply = assistant_message("a")
        reply["_replay_items"] = [{"type": "compaction", "encrypted_content": "x"}]  # type: ignore[typeddict-unknown-key]
        reply["_replay_endpoint"] = "other.example"  # type: ignore[typeddict-unknown-key]
        instructions, items = messages_to_input(
            [system_message("s"), user_message("q"), reply, user_message("q2")],
            endpoint="api.openai.com",
        )
        assert instructions == "s"
        assert [i["type"] for i in items] == ["message", "message", "message"]

    def test_newest_checkpoint_wins(self) -> None:
        """With two checkpoints only the newest is replayed; everything before it is pruned."""
        older, newer = assistant_message("a1"), assistant_message("a2")
        for msg, blob in ((older, "c1"), (newer, "c2")):
            msg["_replay_items"] = [{"type": "compaction", "encrypted_content": blob}]  # type: ignore[typeddict-unknown-key]
            msg["_replay_endpoint"] = "api.openai.com"  # type: ignore[typeddict-unknown-key]
        _, items = messages_to_input(
            [user_message("q1"), older, user_message("q2"), newer, user_message("q3")],
            endpoint="api.openai.com",
        )
        assert [i.get("encrypted_content") or i["content"] for i in items] == [
            "c2",
            "a2",
            [{"type": "input_text", "text": "q3"}],
        ]


def _jwt(claims: dict[str, Any]) -> str:
    import base64

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


def test_image_parts_go_to_responses_as_input_image() -> None:
    """Responses API, input item content: an image is `{"type": "input_image", "image_url",
    "detail"}` after the text (`agent.media` attaches it as an `image_url` part)."""
    url = "data:image/jpeg;base64,/9j/4AAQ"
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is it"},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }
    _, items = messages_to_input([message], endpoint="e")  # type: ignore[list-item]
    assert items[-1]["content"] == [
        {"type": "input_text", "text": "what is it"},
        {"type": "input_image", "image_url": url, "detail": "auto"},
    ]
