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
from agent.events import (
    AgentEvent,
    CompactionBegan,
    CompactionCommitted,
    EngineSwitched,
    EventSink,
    ModelSwitched,
    NativeCompaction,
    SessionReloaded,
    ToolFinished,
    ToolStarted,
)
from agent.messages import ChatMessage
from agent.providers import Provider, ProviderReply, ProviderRequest, ToolSpec, Usage

__all__ = [
    "AgentEvent",
    "ChatMessage",
    "CompactionBegan",
    "CompactionCommitted",
    "CompactionRefused",
    "ConfigError",
    "ContextTooLong",
    "EngineSwitched",
    "EventSink",
    "HermesConfig",
    "HermesError",
    "ModelSwitched",
    "NativeCompaction",
    "Provider",
    "ProviderAuthError",
    "ProviderError",
    "ProviderReply",
    "ProviderRequest",
    "ProviderUnavailable",
    "RateLimited",
    "SessionReloaded",
    "ToolError",
    "ToolFinished",
    "ToolStarted",
    "ToolSpec",
    "TurnLimitReached",
    "Usage",
    "load_config",
]
