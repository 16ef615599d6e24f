"""`web_search`: a few results (title, URL, snippet) from a pluggable backend.

Backends (`web.search.backend`): `searxng` (your instance's JSON API), `brave` (Brave Search API,
key in BRAVE_API_KEY), `tavily` (key in TAVILY_API_KEY), and `ddgs` (DuckDuckGo through the
`ddgs` package: no key, the default). A missing key or a failing backend is a tool error the
model reads; nothing here crashes a turn. Keys never appear in results or logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, assert_never

import httpx

from agent.config_tools import WebSearchConfig
from agent.errors import ToolError
from agent.providers.base import ToolSpec
from agent.tools.registry import Tool, ToolContext

__all__ = [
    "BraveBackend",
    "DdgsBackend",
    "SearchBackend",
    "SearchHit",
    "SearxngBackend",
    "TavilyBackend",
    "search_backend",
    "web_search_tool",
]

BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
TAVILY_URL = "https://api.tavily.com/search"

_SPEC = ToolSpec(
    name="web_search",
    description="Search the web; returns titles, URLs and snippets (read a page with web_fetch).",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit:
    title: str
    url: str
    snippet: str = ""


class SearchBackend(Protocol):
    name: str

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]: ...


def web_search_tool(backend: SearchBackend, config: WebSearchConfig) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError('web_search needs {"query": "words"}')
        try:
            async with asyncio.timeout(config.timeout_s):
                hits = await backend.search(query.strip(), max_results=config.max_results)
        except TimeoutError:
            raise ToolError(
                f"{backend.name} gave no results within {config.timeout_s:g} s"
            ) from None
        except httpx.HTTPStatusError as exc:
            raise ToolError(f"{backend.name} answered HTTP {exc.response.status_code}") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"{backend.name} is unreachable ({type(exc).__name__})") from None
        return format_hits(query, hits[: config.max_results])

    return Tool(spec=_SPEC, handler=handler)


def format_hits(query: str, hits: list[SearchHit]) -> str:
    if not hits:
        return f"No results for {query!r}."
    lines = []
    for i, hit in enumerate(hits, 1):
        lines.append(f"{i}. {hit.title}\n   {hit.url}")
        if hit.snippet:
            lines.append(f"   {' '.join(hit.snippet.split())[:300]}")
    return "\n".join(lines)


def search_backend(config: WebSearchConfig, environ: Mapping[str, str]) -> SearchBackend:
    """The configured backend; its key read from `environ` now (missing: an error per call)."""
    match config.backend:
        case "searxng":
            assert config.url is not None
            return SearxngBackend(config.url)
        case "brave":
            return BraveBackend(_key(config, environ, "BRAVE_API_KEY"))
        case "tavily":
            return TavilyBackend(_key(config, environ, "TAVILY_API_KEY"))
        case "ddgs":
            return DdgsBackend()
        case unreachable:
            assert_never(unreachable)


class SearxngBackend:
    name = "SearXNG"

    def __init__(self, base_url: str) -> None:
        self._url = base_url.rstrip("/") + "/search"

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        params = {"q": query, "format": "json"}
        data = await _get_json("GET", self._url, params=params)
        return _hits(_results(data, "results"), "content")[:max_results]


class BraveBackend:
    name = "Brave Search"

    def __init__(self, key: str | None, *, url: str = BRAVE_URL) -> None:
        self._key, self._url = key, url

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        key = _need(self._key, "BRAVE_API_KEY")
        headers = {"X-Subscription-Token": key, "Accept": "application/json"}
        params = {"q": query, "count": str(max_results)}
        data = await _get_json("GET", self._url, params=params, headers=headers)
        web = data.get("web") if isinstance(data, dict) else None
        return _hits(_results(web, "results"), "description")[:max_results]


class TavilyBackend:
    name = "Tavily"

    def __init__(self, key: str | None, *, url: str = TAVILY_URL) -> None:
        self._key, self._url = key, url

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        key = _need(self._key, "TAVILY_API_KEY")
        body = {"query": query, "max_results": max_results}
        headers = {"Authorization": f"Bearer {key}"}
        data = await _get_json("POST", self._url, json=body, headers=headers)
        return _hits(_results(data, "results"), "content")[:max_results]


class DdgsBackend:
    name = "DuckDuckGo"

    async def search(self, query: str, *, max_results: int) -> list[SearchHit]:
        def run() -> list[dict[str, Any]]:
            from ddgs import DDGS

            return list(DDGS().text(query, max_results=max_results) or [])

        try:
            rows = await asyncio.to_thread(run)
        except Exception as exc:  # ddgs raises its own kinds for blocks and timeouts
            raise ToolError(f"DuckDuckGo search failed ({type(exc).__name__})") from None
        return [
            SearchHit(
                title=str(r.get("title", "")),
                url=str(r.get("href", "")),
                snippet=str(r.get("body") or ""),
            )
            for r in rows
            if r.get("href")
        ]


async def _get_json(method: str, url: str, **kwargs: Any) -> Any:
    async with httpx.AsyncClient(timeout=httpx.Timeout(15.0), trust_env=False) as client:
        response = await client.request(method, url, **kwargs)
        response.raise_for_status()
        try:
            return response.json()
        except ValueError:
            raise ToolError("the search backend did not answer JSON") from None


def _hits(rows: list[dict[str, Any]], snippet_key: str) -> list[SearchHit]:
    """Search results as hits: title, url, and the snippet under `snippet_key`."""
    return [
        SearchHit(
            title=str(r.get("title", "")), url=str(r["url"]), snippet=str(r.get(snippet_key) or "")
        )
        for r in rows
    ]


def _results(data: Any, key: str) -> list[dict[str, Any]]:
    rows = data.get(key) if isinstance(data, dict) else None
    return [r for r in rows or () if isinstance(r, dict) and r.get("url")]


def _key(config: WebSearchConfig, environ: Mapping[str, str], default_env: str) -> str | None:
    return environ.get(config.api_key_env or default_env) or None


def _need(key: str | None, env: str) -> str:
    if not key:
        raise ToolError(f"web_search is set to a backend that needs a key; set {env}")
    return key
