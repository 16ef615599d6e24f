"""The openai SDK for every OpenAI route (Chat Completions, Responses, Codex): imported once, here.

The import is guarded in one place, and the SDK's errors are described once (`OPENAI_ERRORS`) for
`agent.providers._shell.map_sdk_errors`. Only the OpenAI provider modules import this module.
"""

from __future__ import annotations

from agent.providers._error_kinds import HTTPFailure
from agent.providers._shell import missing_sdk, sdk_errors

try:
    import httpx2
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the SDK
    raise missing_sdk(
        "openai", used_by="the openai, openrouter, custom and openai-codex providers"
    ) from exc

__all__ = ["OPENAI_ERRORS", "httpx2", "openai"]


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
