"""Config sections for tools beyond the built-ins: MCP servers (`mcp`) and the web tools (`web`).

Validated at the door like the rest of `config.yaml` (pydantic, unknown keys refused); the
runtime turns them into its own values. Nothing here reads the environment: a bearer token is
named by its variable (`bearer_token_env`) and looked up in the environ `run_agent` passes down.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "DEFAULT_DEFER_AFTER",
    "DEFAULT_FETCH_MAX_BYTES",
    "MCP_NAME",
    "McpConfig",
    "McpServerConfig",
    "WebConfig",
    "WebFetchConfig",
    "WebSearchConfig",
]

DEFAULT_DEFER_AFTER = 12
"""More deferrable (MCP) tools than this and the model gets an index and `tool_search`."""
DEFAULT_FETCH_MAX_BYTES = 2_000_000
DEFAULT_MCP_CALL_TIMEOUT_S = 30.0
DEFAULT_MCP_CONNECT_TIMEOUT_S = 20.0
MCP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
"""A server's name: it prefixes its tools (`name__tool`), so it may not contain `__`."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class McpServerConfig(_Section):
    """One MCP server: a command spoken to over stdio, or a streamable-HTTP URL."""

    command: str | None = None
    """stdio: the program to start (e.g. `npx`)."""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    """stdio: variables for the server besides the SDK's safe defaults (HOME, PATH, ...)."""
    cwd: str | None = None
    url: str | None = None
    """streamable HTTP: the endpoint, e.g. `https://example.com/mcp`."""
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_token_env: str | None = None
    """HTTP: the environment variable holding a bearer token (sent as Authorization)."""
    enabled: bool = True
    timeout_s: float = Field(default=DEFAULT_MCP_CALL_TIMEOUT_S, gt=0)
    """How long one tool call may take before the model is told it timed out."""
    connect_timeout_s: float = Field(default=DEFAULT_MCP_CONNECT_TIMEOUT_S, gt=0)
    approval: Literal["never", "always"] = "never"
    """always: every call of this server's tools asks a person first (refused where nobody can)."""
    approval_tools: list[str] = Field(default_factory=list)
    """Tools (the server's own names) that ask a person first even when `approval` is never."""
    description: str | None = None
    """One line for the tool index; default: the server's own name and instructions."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (stdio) or `url` (streamable HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"


class McpConfig(_Section):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    defer_after: int = Field(default=DEFAULT_DEFER_AFTER, ge=0)
    """With more MCP tools than this (for one principal), the model gets a compact index and a
    `tool_search` step instead of every schema; 0: always."""

    @field_validator("servers")
    @classmethod
    def _names(cls, servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in servers:
            if not MCP_NAME.match(name) or "__" in name:
                raise ValueError(
                    f"server name {name!r}: letters, digits, '-' and single '_' only "
                    "(it prefixes tool names as name__tool)"
                )
        return servers

    def enabled_servers(self) -> list[str]:
        return [name for name, server in self.servers.items() if server.enabled]


class WebFetchConfig(_Section):
    max_bytes: int = Field(default=DEFAULT_FETCH_MAX_BYTES, gt=1000)
    """The most of a page read from the network; the rest is never downloaded."""
    timeout_s: float = Field(default=20.0, gt=0)
    max_redirects: int = Field(default=5, ge=0)
    allow_private: bool = False
    """The terminal user may fetch private, loopback and link-local addresses. Never applies to
    remote principals (HTTP keys, chat users)."""
    allow_hosts: list[str] = Field(default_factory=list)
    """`host:port` pairs anyone granted web_fetch may reach even on a private address (an
    intranet wiki the operator chose to expose). Each hop of a redirect is checked again."""


class WebSearchConfig(_Section):
    backend: Literal["ddgs", "searxng", "brave", "tavily"] = "ddgs"
    """ddgs: DuckDuckGo through the `ddgs` package, no key."""
    url: str | None = None
    """searxng: the instance's base URL (its JSON output must be enabled)."""
    api_key_env: str | None = None
    """brave, tavily: the environment variable holding the key (default BRAVE_API_KEY,
    TAVILY_API_KEY)."""
    max_results: int = Field(default=5, ge=1, le=20)
    timeout_s: float = Field(default=15.0, gt=0)

    @model_validator(mode="after")
    def _searxng_needs_url(self) -> WebSearchConfig:
        if self.backend == "searxng" and not self.url:
            raise ValueError("web.search.backend searxng needs web.search.url")
        return self


class WebConfig(_Section):
    fetch: WebFetchConfig = WebFetchConfig()
    search: WebSearchConfig = WebSearchConfig()
