"""The openai SDK for every OpenAI route (Chat Completions, Responses, Codex): imported once, here.

The import is guarded in one place, and the SDK's errors are described once (`OPENAI_ERRORS`) for
`agent.providers._shell.map_sdk_errors`. Only the OpenAI provider modules import this module.

Requests go through the client's low-level `post` (the openai README, "Making custom/undocumented
requests"), not `chat.completions.create` / `responses.create`: those run
`async_maybe_transform`, a walk of the whole body against the SDK's TypedDicts, on every call
(0.17 ms per message: 185 ms at 1,000 messages), which is the identity on the plain JSON dicts
our converters build (no field of those params has an alias or a format). `create` adds nothing
else to the request but `security={"bearer_auth": True}` (`request_options` keeps it); the
client's headers, retries setting, timeouts, typed errors and `AsyncStream` are the same `post`.
"""

from __future__ import annotations

from agent.providers._error_kinds import HTTPFailure
from agent.providers._shell import missing_sdk, sdk_errors

try:
    import httpx2
    import openai
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.responses import Response, ResponseStreamEvent
except ImportError as exc:  # pragma: no cover - exercised only without the SDK
    raise missing_sdk(
        "openai", used_by="the openai, openrouter, custom and openai-codex providers"
    ) from exc

__all__ = [
    "OPENAI_ERRORS",
    "ChatCompletion",
    "ChatCompletionChunk",
    "Response",
    "ResponseStreamEvent",
    "httpx2",
    "openai",
    "request_options",
]


def _read_status(exc: openai.APIStatusError) -> HTTPFailure:
    """`body` is the envelope's `error` object: message, type, param, code."""
    body = exc.body if isinstance(exc.body, dict) else {}
    param = body.get("param")
    return HTTPFailure(
        status=exc.status_code,
        message=str(body.get("message") or exc.message or ""),
        error_type=exc.type if isinstance(exc.type, str) else None,
        code=exc.code if isinstance(exc.code, str) else None,
        param=param if isinstance(param, str) else None,
        headers=exc.response.headers,
    )


OPENAI_ERRORS = sdk_errors(openai, openai.APIStatusError, _read_status)


def request_options(timeout_s: float) -> openai.RequestOptions:
    """What `create` passes `post` besides the body: the timeout, and bearer auth only (the
    client's default would also send an admin key found in the environment)."""
    return {"timeout": timeout_s, "security": {"bearer_auth": True}}
