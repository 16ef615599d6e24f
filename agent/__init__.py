"""The agent layer: turn loop, providers, context engines, compaction, caching and tools."""

from __future__ import annotations

from agent.config import HermesConfig, load_config
from agent.errors import (
    CompactionRefused,
    ConfigError,
    ContextTooLong,
    HermesError,
    ProviderAuthError,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    ToolError,
    TurnLimitReached,
)
from agent.messages import ChatMessage
from agent.providers import Provider, ProviderReply, ProviderRequest, ToolSpec, Usage

__all__ = [
    "ChatMessage",
    "CompactionRefused",
    "ConfigError",
    "ContextTooLong",
    "HermesConfig",
    "HermesError",
    "Provider",
    "ProviderAuthError",
    "ProviderError",
    "ProviderReply",
    "ProviderRequest",
    "ProviderUnavailable",
    "RateLimited",
    "ToolError",
    "ToolSpec",
    "TurnLimitReached",
    "Usage",
    "load_config",
]
