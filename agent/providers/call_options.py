"""A caller's per-call model options (the HTTP API's pass-through fields) and each wire's form.

Named as the OpenAI Chat Completions request names them
(https://platform.openai.com/docs/api-reference/chat/create): `tool_choice`,
`parallel_tool_calls`, `response_format`, `temperature`, `top_p`, `max_tokens`, `stop`, `seed`.
Every wire either carries an option faithfully or names it in `unsupported`, so a caller can
refuse the request before anything runs; nothing is dropped on the way.

- OpenAI Chat Completions: every option as is.
- OpenAI Responses (https://platform.openai.com/docs/api-reference/responses/create):
  `tool_choice` (a function choice flattened to `{"type": "function", "name"}`),
  `parallel_tool_calls`, `response_format` as `text.format`, `temperature`, `top_p`; it has no
  `stop` and no `seed`.
- Anthropic Messages (https://docs.anthropic.com/en/api/messages, as the pinned anthropic SDK
  2.14 types `messages.create`): `tool_choice` as `{"type": "auto" | "any" | "tool" | "none",
  "name"}`, `parallel_tool_calls: false` as `disable_parallel_tool_use`, `stop` as
  `stop_sequences`, `response_format` as structured output (`output_config.format`, a JSON
  schema; `json_object` is the schema `{"type": "object"}`). That API takes no `seed`, and no
  `temperature` or `top_p` (sampling is the model's own): those three are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, assert_never

__all__ = [
    "CallOptions",
    "ToolChoice",
    "Wire",
    "anthropic_fields",
    "openai_chat_fields",
    "responses_fields",
    "unsupported",
    "wire_of",
]

Wire: TypeAlias = Literal["openai_chat", "responses", "anthropic", "codex_app_server"]
ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str
""""auto" | "none" | "required", or any other string: the name of the one function to call."""
_MODES = ("auto", "none", "required")


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOptions:
    """What the caller asked of each model call of a turn; None (or empty) means "not asked"."""

    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    """`{"type": "json_object"}` or `{"type": "json_schema", "json_schema": {...}}`; a plain
    `{"type": "text"}` is the default and is not kept."""
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    """An upper bound on the reply; the agent still lowers it to what fits the window."""
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def asked(self) -> tuple[str, ...]:
        """The names of the options set, in declaration order."""
        return tuple(
            name
            for name in _FIELDS
            if getattr(self, name) not in (None, ())  # an empty stop is not asked
        )


_FIELDS = (
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "temperature",
    "top_p",
    "max_tokens",
    "stop",
    "seed",
)


def wire_of(provider: str, api_mode: str) -> Wire:
    """The wire a configured route speaks (mirrors `registry.build_provider`)."""
    if api_mode == "codex_app_server":
        return "codex_app_server"
    if api_mode == "responses" or provider == "openai-codex":
        return "responses"
    if provider == "anthropic":
        return "anthropic"
    return "openai_chat"


def unsupported(options: CallOptions, wire: Wire) -> tuple[tuple[str, str], ...]:
    """(option, why) for every asked option `wire` cannot honour."""
    asked = options.asked()
    reasons: list[tuple[str, str]] = []
    match wire:
        case "openai_chat":
            pass
        case "responses":
            for name in ("stop", "seed"):
                if name in asked:
                    reasons.append((name, "the OpenAI Responses API has no such option"))
        case "anthropic":
            for name in ("temperature", "top_p", "seed"):
                if name in asked:
                    reasons.append((name, "the Anthropic Messages API takes no such option"))
        case "codex_app_server":
            # The app-server runs its own agent loop and sampling; none of these reach it.
            reasons.extend(
                (name, "the codex app-server route takes no sampling options") for name in asked
            )
        case unreachable:
            assert_never(unreachable)
    return tuple(reasons)


def openai_chat_fields(options: CallOptions) -> dict[str, Any]:
    """Chat Completions keyword arguments (without `max_tokens`, which the request carries)."""
    fields: dict[str, Any] = {}
    if options.tool_choice is not None:
        fields["tool_choice"] = (
            options.tool_choice
            if options.tool_choice in _MODES
            else {"type": "function", "function": {"name": options.tool_choice}}
        )
    if options.parallel_tool_calls is not None:
        fields["parallel_tool_calls"] = options.parallel_tool_calls
    if options.response_format is not None:
        fields["response_format"] = options.response_format
    if options.top_p is not None:
        fields["top_p"] = options.top_p
    if options.stop:
        fields["stop"] = list(options.stop)
    if options.seed is not None:
        fields["seed"] = options.seed
    return fields


def responses_fields(options: CallOptions) -> dict[str, Any]:
    """Responses keyword arguments (`stop` and `seed` are refused earlier by `unsupported`)."""
    fields: dict[str, Any] = {}
    if options.tool_choice is not None:
        fields["tool_choice"] = (
            options.tool_choice
            if options.tool_choice in _MODES
            else {"type": "function", "name": options.tool_choice}
        )
    if options.parallel_tool_calls is not None:
        fields["parallel_tool_calls"] = options.parallel_tool_calls
    if options.response_format is not None:
        fields["text"] = {"format": _responses_format(options.response_format)}
    if options.top_p is not None:
        fields["top_p"] = options.top_p
    return fields


def anthropic_fields(options: CallOptions, *, has_tools: bool) -> dict[str, Any]:
    """Messages keyword arguments (`temperature`, `top_p`, `seed` are refused by `unsupported`)."""
    fields: dict[str, Any] = {}
    choice: dict[str, Any] | None = None
    match options.tool_choice:
        case None:
            pass
        case "auto":
            choice = {"type": "auto"}
        case "required":
            choice = {"type": "any"}
        case "none":
            choice = {"type": "none"}
        case name:
            choice = {"type": "tool", "name": name}
    if options.parallel_tool_calls is False and has_tools:
        choice = choice or {"type": "auto"}
        if choice["type"] != "none":
            choice["disable_parallel_tool_use"] = True
    if choice is not None and has_tools:
        fields["tool_choice"] = choice
    if options.response_format is not None:
        fields["output_config"] = {"format": _anthropic_format(options.response_format)}
    if options.stop:
        fields["stop_sequences"] = list(options.stop)
    return fields


def _anthropic_format(response_format: dict[str, Any]) -> dict[str, Any]:
    """Chat's json_schema (or json_object: any object) as Anthropic's structured output."""
    inner = response_format.get("json_schema") or {}
    schema = inner.get("schema") or {"type": "object"}
    return {"type": "json_schema", "schema": schema}


def _responses_format(response_format: dict[str, Any]) -> dict[str, Any]:
    """Chat's `{"type": "json_schema", "json_schema": {name, schema, strict, description}}` is
    flat in Responses: `{"type": "json_schema", name, schema, strict, description}`."""
    if response_format.get("type") != "json_schema":
        return dict(response_format)
    inner = response_format.get("json_schema") or {}
    return {"type": "json_schema", **inner}
