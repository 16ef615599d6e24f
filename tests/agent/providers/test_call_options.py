"""Each wire's form of the caller's pass-through options.

Contracts: OpenAI Chat Completions (https://platform.openai.com/docs/api-reference/chat/create),
OpenAI Responses (https://platform.openai.com/docs/api-reference/responses/create: flat function
`tool_choice`, `text.format`), Anthropic Messages (https://docs.anthropic.com/en/api/messages:
`tool_choice` {"type": "auto" | "any" | "tool" | "none"}, `disable_parallel_tool_use`,
`stop_sequences`).
"""

from __future__ import annotations

from agent.providers._convert_anthropic import request_to_anthropic
from agent.providers._convert_openai import request_to_openai
from agent.providers._responses_convert import request_to_responses
from agent.providers.base import ProviderRequest, ToolSpec
from agent.providers.call_options import CallOptions, unsupported, wire_of

TOOL = ToolSpec(name="lookup", description="", parameters={"type": "object"})
SCHEMA = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
OPTIONS = CallOptions(
    tool_choice="lookup",
    parallel_tool_calls=False,
    response_format=SCHEMA,
    temperature=0.3,
    top_p=0.8,
    max_tokens=50,
    stop=("END",),
    seed=11,
)


def _request(options: CallOptions) -> ProviderRequest:
    return ProviderRequest(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        tools=(TOOL,),
        max_tokens=50,
        temperature=options.temperature,
        options=options,
    )


def test_openai_chat_gets_every_option_as_the_client_sent_it() -> None:
    kwargs = request_to_openai(_request(OPTIONS), accepts_cache_control=False)
    assert kwargs["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert kwargs["parallel_tool_calls"] is False
    assert kwargs["response_format"] == SCHEMA
    assert (kwargs["temperature"], kwargs["top_p"], kwargs["max_tokens"]) == (0.3, 0.8, 50)
    assert (kwargs["stop"], kwargs["seed"]) == (["END"], 11)
    assert unsupported(OPTIONS, "openai_chat") == ()


def test_anthropic_maps_tool_choice_and_stop() -> None:
    options = CallOptions(
        tool_choice="lookup", parallel_tool_calls=False, stop=("END",), response_format=SCHEMA
    )
    kwargs = request_to_anthropic(_request(options))
    assert kwargs["tool_choice"] == {
        "type": "tool",
        "name": "lookup",
        "disable_parallel_tool_use": True,
    }
    assert kwargs["stop_sequences"] == ["END"]
    assert kwargs["output_config"] == {
        "format": {"type": "json_schema", "schema": {"type": "object"}}
    }
    assert "top_p" not in kwargs and "temperature" not in kwargs
    for mode, wire in (("auto", "auto"), ("required", "any"), ("none", "none")):
        kwargs = request_to_anthropic(_request(CallOptions(tool_choice=mode)))
        assert kwargs["tool_choice"] == {"type": wire}
    assert [name for name, _ in unsupported(OPTIONS, "anthropic")] == [
        "temperature",
        "top_p",
        "seed",
    ]


def test_responses_flattens_the_function_choice_and_the_schema() -> None:
    options = CallOptions(tool_choice="lookup", parallel_tool_calls=True, response_format=SCHEMA)
    kwargs = request_to_responses(_request(options), endpoint="api.openai.com")
    assert kwargs["tool_choice"] == {"type": "function", "name": "lookup"}
    assert kwargs["parallel_tool_calls"] is True
    assert kwargs["text"] == {
        "format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}}
    }
    assert [name for name, _ in unsupported(OPTIONS, "responses")] == ["stop", "seed"]


def test_no_options_change_no_payload() -> None:
    plain = ProviderRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=(TOOL,))
    for key in ("tool_choice", "stop", "seed", "top_p", "response_format", "parallel_tool_calls"):
        assert key not in request_to_openai(plain, accepts_cache_control=False)
    assert "tool_choice" not in request_to_anthropic(plain)
    assert "text" not in request_to_responses(plain, endpoint="e")


def test_a_tools_strict_flag_reaches_every_wire() -> None:
    strict = ToolSpec(name="s", description="", parameters={"type": "object"}, strict=True)
    plain = ProviderRequest(
        model="m", messages=[{"role": "user", "content": "hi"}], tools=(strict, TOOL)
    )
    openai_tools = request_to_openai(plain, accepts_cache_control=False)["tools"]
    assert [t["function"].get("strict") for t in openai_tools] == [True, None]
    assert [t.get("strict") for t in request_to_anthropic(plain)["tools"]] == [True, None]
    assert [t.get("strict") for t in request_to_responses(plain, endpoint="e")["tools"]] == [
        True,
        None,
    ]


def test_wire_of_follows_the_registry() -> None:
    assert wire_of("anthropic", "chat_completions") == "anthropic"
    assert wire_of("openai", "responses") == "responses"
    assert wire_of("openai-codex", "chat_completions") == "responses"
    assert wire_of("openrouter", "chat_completions") == "openai_chat"
    assert wire_of("openai", "codex_app_server") == "codex_app_server"
