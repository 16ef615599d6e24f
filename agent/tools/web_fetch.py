"""`web_fetch`: one web page as readable markdown, capped, from public addresses only.

httpx fetches with redirects followed by hand, so each hop passes `agent.tools.web_guard`
(resolved, checked, pinned to the checked address). The body is read as a stream and reading stops
at `web.fetch.max_bytes`: a 10 MB page costs the cap, not 10 MB. HTML becomes markdown with
trafilatura (main text, links and tables; menus and footers left out); text and JSON pass as they
are; anything else is refused. Remote principals never reach private addresses, whatever
`allow_private` says; `allow_hosts` is the operator's explicit exception for everyone.
"""

from __future__ import annotations

import asyncio
import codecs
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import httpx

from agent.config_tools import WebFetchConfig
from agent.errors import ToolError
from agent.providers.base import ToolSpec
from agent.tools.registry import Tool, ToolContext
from agent.tools.web_guard import PinnedTarget, Resolver, pin_target, system_resolver

__all__ = ["FetchedPage", "fetch_page", "page_markdown", "web_fetch_tool"]

USER_AGENT = "Hermes/0.1 (+web_fetch)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml")

_SPEC = ToolSpec(
    name="web_fetch",
    description="Fetch a web page (http/https) and return its main text as markdown.",
    parameters={
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The page's URL."}},
        "required": ["url"],
    },
)


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedPage:
    url: str
    """Where the page was finally read from (after redirects)."""
    status: int
    content_type: str
    body: bytes
    truncated: bool
    """The page was longer than the cap; `body` holds its first `max_bytes`."""
    encoding: str | None = None


def web_fetch_tool(config: WebFetchConfig, *, resolve: Resolver = system_resolver) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        url = args.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ToolError('web_fetch needs {"url": "https://..."}')
        remote = ctx.principal is not None and ctx.principal.platform != "terminal"
        page = await fetch_page(
            url.strip(), config, allow_private=config.allow_private and not remote, resolve=resolve
        )
        text = await asyncio.to_thread(page_markdown, page)
        return _framed(page, text, ctx.max_output_chars)

    return Tool(spec=_SPEC, handler=handler)


async def fetch_page(
    url: str,
    config: WebFetchConfig,
    *,
    allow_private: bool,
    resolve: Resolver = system_resolver,
) -> FetchedPage:
    """GET `url`, each hop checked and pinned, at most `config.max_bytes` read."""
    timeout = httpx.Timeout(config.timeout_s)
    async with httpx.AsyncClient(
        timeout=timeout, follow_redirects=False, trust_env=False
    ) as client:
        async with asyncio.timeout(config.timeout_s * (config.max_redirects + 1)):
            for _ in range(config.max_redirects + 1):
                target = await pin_target(
                    url,
                    allow_private=allow_private,
                    allow_hosts=config.allow_hosts,
                    resolve=resolve,
                )
                try:
                    response = await client.send(_pinned_request(client, target), stream=True)
                except httpx.HTTPError as exc:
                    raise ToolError(f"could not fetch {url}: {type(exc).__name__}") from None
                try:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        url = urljoin(url, location)
                        continue
                    body, truncated = await _read_capped(response, config.max_bytes)
                    return FetchedPage(
                        url=url,
                        status=response.status_code,
                        content_type=response.headers.get("content-type", ""),
                        body=body,
                        truncated=truncated,
                        encoding=response.charset_encoding,
                    )
                finally:
                    await response.aclose()
    raise ToolError(f"more than {config.max_redirects} redirects; stopped at {url}")


def page_markdown(page: FetchedPage) -> str:
    """The page as text: HTML's main content as markdown, text as it is; ToolError otherwise."""
    kind = page.content_type.split(";")[0].strip().lower()
    if kind and not kind.startswith(_TEXT_TYPES):
        raise ToolError(f"{page.url} is {kind}, not a text page; it was not read")
    text = page.body.decode(_codec(page.encoding), errors="replace")
    if kind not in ("text/html", "application/xhtml+xml") and not (
        not kind and "<html" in text[:2000].lower()
    ):
        return text
    import trafilatura

    extracted = trafilatura.extract(
        text,
        url=page.url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        favor_recall=True,
    )
    if not extracted:
        extracted = trafilatura.html2txt(text) or ""
    title = _title(text)
    return f"# {title}\n\n{extracted}" if title and title not in extracted[:300] else extracted


def _pinned_request(client: httpx.AsyncClient, target: PinnedTarget) -> httpx.Request:
    default_port = 443 if target.scheme == "https" else 80
    host_header = target.host if target.port == default_port else f"{target.host}:{target.port}"
    if ":" in target.host:  # an IPv6 literal
        host_header = f"[{target.host}]" + (
            "" if target.port == default_port else f":{target.port}"
        )
    url = httpx.URL(target.url).copy_with(host=target.address)
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    headers = {"Host": host_header, "User-Agent": USER_AGENT, "Accept": "text/html,*/*;q=0.8"}
    return client.build_request("GET", url, headers=headers, extensions=extensions)


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """At most `max_bytes` of the (decoded) body; reading stops there, so the rest never
    leaves the socket (and a compressed bomb cannot expand past the cap)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > max_bytes:
            chunks.append(chunk[: max_bytes - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _codec(name: str | None) -> str:
    """The page's declared charset if Python knows it, else UTF-8."""
    try:
        return codecs.lookup(name).name if name else "utf-8"
    except LookupError:
        return "utf-8"


def _title(html: str) -> str | None:
    found = re.search(r"<title[^>]*>(.*?)</title>", html[:20_000], re.I | re.S)
    return " ".join(found.group(1).split())[:200] if found else None


def _framed(page: FetchedPage, text: str, max_chars: int) -> str:
    notes = [f"URL: {page.url} (HTTP {page.status})"]
    if page.truncated:
        notes.append(f"Only the first {len(page.body):,} bytes of a longer page were read.")
    if len(text) > max_chars:
        notes.append(f"Showing {max_chars:,} of {len(text):,} characters.")
        text = text[:max_chars]
    return "\n".join(notes) + "\n\n" + text
