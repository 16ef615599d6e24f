"""Context engine plugin "lcm": lossless context management over the soft archive.

Nothing leaves the archive; the active context holds a hierarchy of summaries whose anchors
point at the archived rows, and the agent gets `lcm_grep` (a regular expression over the whole
session) and `lcm_expand` (anchor to rows). Active only with `context.engine: lcm`; resolved
like every engine (plugin folder, then registry, then the built-in). See `engine` and
`hierarchy` for how a pass works.
"""

from __future__ import annotations

from typing import Any

from agent.plugin_api import ContextEngine, HermesConfig

from .engine import LcmEngine

__all__ = ["LcmEngine", "create_engine"]


def create_engine(config: HermesConfig, **deps: Any) -> ContextEngine:
    """Plugin entry point: `deps` are the runtime's summarizer and summary model."""
    return LcmEngine(
        config.compression,
        summarizer=deps["summarizer"],
        summary_model=deps["summary_model"],
        summary_timeout_s=config.auxiliary.compression.timeout_s,
    )
