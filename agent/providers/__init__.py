"""Model providers behind one `Provider` protocol; SDKs are imported only when one is built."""

from __future__ import annotations

from agent.providers.base import (
    OnText,
    Provider,
    ProviderReply,
    ProviderRequest,
    ProviderSettings,
    StopReason,
    ToolSpec,
    Usage,
)

__all__ = [
    "OnText",
    "Provider",
    "ProviderReply",
    "ProviderRequest",
    "ProviderSettings",
    "StopReason",
    "ToolSpec",
    "Usage",
]
