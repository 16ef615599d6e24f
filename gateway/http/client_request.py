"""A Chat Completions request body, read and checked: `parse_chat_request(raw) -> ChatRequest`.

The contract is the OpenAI API reference, "Create chat completion"
(https://platform.openai.com/docs/api-reference/chat/create), as the openai SDK types it
(`openai.types.chat.completion_create_params`). Every refusal is an `ApiError` 400
`invalid_request_error` whose `param` names the field at fault (`messages[3].content[1]`),
with a sentence a person can act on.

What a route cannot honour is refused, never dropped: `n > 1`, audio and file content parts,
images outside user messages (a user's images are taken: `gateway.http.image_parts`), audio
output, `logprobs`, `logit_bias`, penalties, `reasoning_effort`, `verbosity`, web search, the
deprecated `functions`/`function_call`, and unknown roles. Fields that change nothing about the answer are accepted and ignored: `user`
(session routing reads it), `metadata`, `store`, `service_tier`, `prompt_cache_key`,
`safety_identifier`, `prediction`, `stream_options` (beyond `include_usage`), and each of the
refused ones at its default (`n: 1`, `logprobs: false`, `presence_penalty: 0`, ...). Unknown
top-level fields are ignored, as clients add their own (litellm, langchain). Whether a
pass-through field reaches the route's wire is `agent.providers.call_options.unsupported`'s
call (see `refuse_unsupported`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.messages import ChatMessage, ToolCall, new_message
from agent.providers.base import ToolSpec
from agent.providers.call_options import CallOptions, Wire, unsupported
from gateway.http.error_envelope import ApiError

__all__ = ["ChatRequest", "parse_chat_request", "refuse_unsupported"]

MAX_STOP_SEQUENCES = 4
_ROLES = ("system", "developer", "user", "assistant", "tool")
_TEXT_ONLY = "this server takes text and (in user messages) images only"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """A checked Chat Completions request, in the agent's terms."""

    model: str | None
    messages: tuple[ChatMessage, ...]
    """Canonical messages in request order (`developer` becomes `system`); never empty."""
    stream: bool = False
    include_usage: bool = False
    """`stream_options.include_usage`: a last chunk carries the usage."""
    user: str | None = None
    tools: tuple[ToolSpec, ...] | None = None
    """The client's own tools; None when it sent none (Hermes' tools serve the turn)."""
    options: CallOptions = CallOptions()


class _Function(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    strict: bool | None = None


class _Tool(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["function"]
    function: _Function


class _NamedChoice(BaseModel):
    class _Name(BaseModel):
        name: str

    type: Literal["function"]
    function: _Name


class _JsonSchema(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class _ResponseFormat(BaseModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: _JsonSchema | None = None


class _Body(BaseModel):
    """The top level; messages are checked one by one (`_message`) for exact `param`s."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    messages: list[Any] = Field(min_length=1)
    model: str | None = None
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    user: str | None = None
    tools: list[_Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | _NamedChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: _ResponseFormat | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int | None = Field(default=None, ge=1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0)
    logit_bias: dict[str, float] | None = None
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    verbosity: str | None = None
    web_search_options: dict[str, Any] | None = None
    functions: list[Any] | None = None
    function_call: Any = None


def parse_chat_request(raw: object) -> ChatRequest:
    """The request `raw` (the decoded JSON body) asks for; raises ApiError 400 naming the field."""
    if not isinstance(raw, dict):
        raise _invalid("the request body must be a JSON object", None)
    try:
        body = _Body.model_validate(raw)
    except ValidationError as exc:
        raise _from_validation(exc) from None
    _refuse_unhonourable(body)
    tools = _tools(body.tools)
    names: dict[str, str] = {}  # call id -> tool name, for the results that follow
    messages: list[ChatMessage] = []
    for index, raw_message in enumerate(body.messages):
        message = _message(index, raw_message, names)
        messages.append(message)
        names.update((c["id"], c["function"]["name"]) for c in message.get("tool_calls") or ())
    stream = bool(body.stream)
    if body.stream_options is not None and not stream:
        raise _invalid("stream_options is only allowed when stream is true", "stream_options")
    return ChatRequest(
        model=body.model,
        messages=tuple(messages),
        stream=stream,
        include_usage=bool((body.stream_options or {}).get("include_usage")),
        user=body.user,
        tools=tools,
        options=_options(body, tools),
    )


def refuse_unsupported(request: ChatRequest, wire: Wire) -> None:
    """Raise ApiError 400 naming the first pass-through field the route's `wire` cannot carry."""
    for name, why in unsupported(request.options, wire):
        raise _invalid(f"{name} cannot be honoured on this server's model route: {why}", name)


# ---- the top level ------------------------------------------------------------------------


def _refuse_unhonourable(body: _Body) -> None:
    """Fields whose effect no route here can give, unless left at their default."""
    if body.n is not None and body.n > 1:
        raise _invalid("n > 1 is not supported: this server returns one choice per request", "n")
    if body.logprobs:
        raise _invalid("logprobs are not available from this server", "logprobs")
    if body.top_logprobs:
        raise _invalid("top_logprobs are not available from this server", "top_logprobs")
    if body.logit_bias:
        raise _invalid("logit_bias is not supported by this server", "logit_bias")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(body, name):
            raise _invalid(f"{name} is not supported by this server; leave it at 0", name)
    if body.modalities is not None and any(m != "text" for m in body.modalities):
        raise _invalid("this server answers with text only", "modalities")
    if body.audio is not None:
        raise _invalid("this server answers with text only", "audio")
    for name in ("reasoning_effort", "verbosity", "web_search_options"):
        if getattr(body, name) is not None:
            raise _invalid(f"{name} is not supported by this server", name)
    if body.functions is not None or body.function_call is not None:
        name = "functions" if body.functions is not None else "function_call"
        raise _invalid(f"{name} is deprecated and not supported; use tools and tool_choice", name)


def _tools(tools: list[_Tool] | None) -> tuple[ToolSpec, ...] | None:
    if not tools:
        return None  # `tools: []` asks for nothing: Hermes' own tools serve the turn
    seen: set[str] = set()
    specs: list[ToolSpec] = []
    for index, tool in enumerate(tools):
        function = tool.function
        if function.name in seen:
            raise _invalid(
                f"tool name {function.name!r} is defined twice", f"tools[{index}].function.name"
            )
        seen.add(function.name)
        specs.append(
            ToolSpec(
                name=function.name,
                description=function.description,
                parameters=function.parameters,
                strict=function.strict,
            )
        )
    return tuple(specs)


def _options(body: _Body, tools: tuple[ToolSpec, ...] | None) -> CallOptions:
    choice: str | None = None
    if isinstance(body.tool_choice, _NamedChoice):
        choice = body.tool_choice.function.name
        if tools is None or choice not in {t.name for t in tools}:
            raise _invalid(
                f"tool_choice names {choice!r}, which is not one of the request's tools",
                "tool_choice",
            )
    elif body.tool_choice is not None:
        choice = body.tool_choice
        if tools is None and choice != "none":
            raise _invalid("tool_choice is only allowed when tools are given", "tool_choice")
    stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
    if len(stop) > MAX_STOP_SEQUENCES:
        raise _invalid(f"stop takes at most {MAX_STOP_SEQUENCES} sequences", "stop")
    if any(not s for s in stop):
        raise _invalid("stop sequences must not be empty", "stop")
    return CallOptions(
        tool_choice=choice,
        parallel_tool_calls=body.parallel_tool_calls,
        response_format=_response_format(body.response_format),
        temperature=body.temperature,
        top_p=body.top_p,
        max_tokens=body.max_completion_tokens or body.max_tokens,
        stop=stop,
        seed=body.seed,
    )


def _response_format(fmt: _ResponseFormat | None) -> dict[str, Any] | None:
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return {"type": "json_object"}
    if fmt.json_schema is None:
        raise _invalid(
            "response_format of type json_schema needs a json_schema object",
            "response_format.json_schema",
        )
    return {
        "type": "json_schema",
        "json_schema": fmt.json_schema.model_dump(by_alias=True, exclude_none=True),
    }


# ---- messages -----------------------------------------------------------------------------


def _message(index: int, raw: object, names: Mapping[str, str]) -> ChatMessage:
    """One request message as a canonical message; refusals name `messages[index]...`. A tool
    result is named after its call when an earlier message made it (`names`)."""
    where = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise _invalid(f"{where} must be an object with a role", where)
    role = raw.get("role")
    if role not in _ROLES:
        shown = "missing" if role is None else repr(role)
        raise _invalid(
            f"{where}.role is {shown}; expected one of {', '.join(_ROLES)}"
            + (" (function messages are deprecated; use tool)" if role == "function" else ""),
            f"{where}.role",
        )
    content = _content(where, raw.get("content", None), role)
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _invalid(
                f"{where} has role tool and needs a tool_call_id", f"{where}.tool_call_id"
            )
        return new_message("tool", content, tool_call_id=call_id, name=names.get(call_id, ""))
    if role == "assistant":
        calls = _tool_calls(where, raw.get("tool_calls"))
        if calls:
            return new_message("assistant", content or None, tool_calls=calls)
        return new_message("assistant", content if content is not None else "")
    if content is None:
        raise _invalid(f"{where} has role {role} and needs content", f"{where}.content")
    return new_message("system" if role == "developer" else role, content)


def _content(where: str, content: object, role: str) -> str | list[dict[str, Any]] | None:
    """A string, or text parts as text blocks; None stays None (an assistant's tool calls)."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _invalid(f"{where}.content must be a string or an array of parts", f"{where}.content")
    blocks: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        at = f"{where}.content[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" or (kind == "refusal" and role == "assistant"):
            text = part.get(kind)
            if not isinstance(text, str):
                raise _invalid(f"{at}.{kind} must be a string", f"{at}.{kind}")
            blocks.append({"type": "text", "text": text})
        elif kind == "image_url" and role == "user":
            blocks.append(_image_part(at, part))
        elif kind in ("image_url", "input_audio", "file"):
            raise _invalid(f"{at} is an {kind} part, and {_TEXT_ONLY}; send text", at)
        else:
            raise _invalid(f"{at} must be a text part (type 'text')", f"{at}.type")
    return blocks


def _image_part(at: str, part: dict[str, Any]) -> dict[str, Any]:
    """An `image_url` part (`{"url": "data:image/...;base64,..." | "https://...", "detail"}`),
    kept as a block for `gateway.http.image_parts` to fetch and store; other URLs are a 400."""
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else None
    if not isinstance(url, str) or not url.startswith(("data:", "https://")):
        raise _invalid(
            f"{at}.image_url.url must be a data: URL or an https:// URL", f"{at}.image_url.url"
        )
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_calls(where: str, raw: object) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _invalid(f"{where}.tool_calls must be an array", f"{where}.tool_calls")
    calls: list[ToolCall] = []
    for index, call in enumerate(raw):
        at = f"{where}.tool_calls[{index}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(function, dict):
            raise _invalid(f"{at} must be a function tool call", at)
        call_id, name = call.get("id"), function.get("name")
        arguments = function.get("arguments", "")
        if not isinstance(call_id, str) or not call_id:
            raise _invalid(f"{at}.id must be a non-empty string", f"{at}.id")
        if not isinstance(name, str) or not name:
            raise _invalid(f"{at}.function.name must be a non-empty string", f"{at}.function.name")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        )
    return calls


# ---- errors -------------------------------------------------------------------------------


def _invalid(message: str, param: str | None) -> ApiError:
    return ApiError(400, message, "invalid_request_error", param=param)


def _from_validation(exc: ValidationError) -> ApiError:
    """The first problem pydantic found, as a sentence naming the field (no model names)."""
    error = exc.errors(include_url=False, include_context=True)[0]
    param = _param(error["loc"])
    kind = error["type"]
    if kind == "missing":
        return _invalid(f"{param} is required", param)
    if kind == "too_short" and param == "messages":
        return _invalid("messages must contain at least one message", param)
    shown = _shown(error.get("input"))
    return _invalid(f"{param}: {_sentence(error['msg'])} (got {shown})", param)


def _param(loc: Sequence[int | str]) -> str:
    """("messages", 3, "content") -> "messages[3].content"; union branch tags are dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _UNION_TAGS or part.startswith(("literal[", "function-")):
            continue
        else:
            out += f".{part}" if out else part
    return out.replace("schema_", "schema")


_UNION_TAGS = frozenset({"str", "list[str]", "_NamedChoice", "list[_Tool]", "float", "int"})


def _sentence(msg: str) -> str:
    return msg[:1].lower() + msg[1:]


def _shown(value: object) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
