"""Tools the model can call: the registry and the built-in tools."""

from __future__ import annotations

from agent.tools.registry import Approver, Tool, ToolContext, ToolHandler, ToolRegistry

__all__ = ["Approver", "Tool", "ToolContext", "ToolHandler", "ToolRegistry"]
