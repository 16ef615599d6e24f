"""The summary call of a batch compaction, with the failure policy DESIGN.md fixes: one I/O step.

Auth, network and overload errors, a timeout, a cut-off or an empty reply leave the transcript
untouched (`CompactionRefused`); any other failure of the model means the caller falls back to
the deterministic local summary (`LocalFallback`). Credentials in the reply are redacted.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from agent.errors import CompactionRefused, ProviderAuthError, ProviderUnavailable, RateLimited
from agent.messages import content_text
from agent.providers.base import Provider, ProviderRequest
from agent.redaction import redact_text

__all__ = ["LocalFallback", "request_summary"]

log = structlog.get_logger(__name__)

_TRANSIENT = (ProviderAuthError, ProviderUnavailable, RateLimited)


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalFallback:
    """The model failed in a way the deterministic local summary covers."""

    failure: str
    """The error's type name, for the summary's first line (never its message)."""


async def request_summary(
    summarizer: Provider, request: ProviderRequest, *, timeout_s: float
) -> str | LocalFallback:
    """The summary text, or `LocalFallback` when the caller should build the local summary.

    Raises CompactionRefused (with a content-free reason) for failures that must not compact.
    """
    try:
        async with asyncio.timeout(timeout_s):
            reply = await summarizer.complete(request)
    except _TRANSIENT as exc:
        raise CompactionRefused(f"summary model failed: {type(exc).__name__}") from exc
    except TimeoutError as exc:
        raise CompactionRefused(f"summary model timed out after {timeout_s:g} s") from exc
    except Exception as exc:  # any other failure: the deterministic summary takes over
        log.warning("summary_call_failed", error_type=type(exc).__name__)
        return LocalFallback(failure=type(exc).__name__)
    if reply.stop_reason == "max_tokens":
        raise CompactionRefused("summary was cut off at the token limit")
    text = content_text(reply.message).strip()
    if not text:
        raise CompactionRefused("summary model returned an empty summary")
    return redact_text(text)
