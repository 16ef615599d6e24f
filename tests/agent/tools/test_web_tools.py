"""web_fetch against a local test site and web_search against a fake SearXNG, both on loopback.

The site is on 127.0.0.1, which web_fetch refuses by default; the tests let it through with
`allow_hosts: ["127.0.0.1:<site port>"]` (the operator's exact host:port exception) and keep
every other loopback port off limits. An "internal service" on a second port stands for what a
chat user must not reach: the redirect test judges the effect (the service got no request),
not only the verdict. The same redirect for the terminal user with `allow_private` is followed,
so the refusal is the guard's doing and not a broken redirect.

Contracts: RFC 9110 §15.4 (a 3xx `Location` is resolved against the request URL); SearXNG
search API (`GET /search?q=...&format=json` → `{"results": [{"title", "url", "content"}]}`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from agent.access import Principal
from agent.config_tools import WebFetchConfig, WebSearchConfig
from agent.tools.registry import Tool, ToolContext, ToolRegistry
from agent.tools.web_fetch import web_fetch_tool
from agent.tools.web_guard import address_problem
from agent.tools.web_search import SearxngBackend, search_backend, web_search_tool

ARTICLE = """<!doctype html><html><head><title>Otters of the Elbe</title></head><body>
<nav><a href="/">Home</a> | <a href="/shop">Shop</a> | <a href="/login">Log in</a></nav>
<article><h1>Otters of the Elbe</h1>
<p>Eurasian otters returned to the Elbe after decades away. Surveys along the river counted
more than forty family groups last spring, most of them near the floodplain forests.</p>
<p>Researchers credit cleaner water and the fish ladders built since 2005; the otters now
range from Dresden to the estuary, and sightings near Hamburg are no longer rare.</p>
<p>Volunteers keep recording tracks and spraint every month; the data are public.</p>
</article>
<footer>Cookie settings · Imprint · © 2026 River News</footer></body></html>"""
TEN_MB = 10 * 1024 * 1024
CHUNK = b"<p>" + b"x" * 65_530 + b"</p>"

REMOTE = Principal(platform="http", id="alice", tools=frozenset({"web_fetch"}))
OPERATOR = Principal.operator(["web_fetch", "web_search"], can_approve=False)


@dataclass
class Site:
    port: int
    internal_port: int
    internal_hits: list[str] = field(default_factory=list)
    big_bytes_sent: list[int] = field(default_factory=list)
    big_ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the /big handler stops sending (the client closed, or all was sent)."""

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    internal = web.Application()
    state: dict[str, Site] = {}

    async def secret(request: web.Request) -> web.Response:
        state["site"].internal_hits.append(request.path)
        return web.Response(text="internal admin page", content_type="text/plain")

    internal.router.add_get("/{tail:.*}", secret)

    app = web.Application()

    async def article(_: web.Request) -> web.Response:
        return web.Response(text=ARTICLE, content_type="text/html")

    async def big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        response.content_length = TEN_MB
        await response.prepare(request)
        sent = 0
        try:
            while sent < TEN_MB:
                await response.write(CHUNK[: TEN_MB - sent])
                sent += min(len(CHUNK), TEN_MB - sent)
        finally:
            state["site"].big_bytes_sent.append(sent)
            state["site"].big_ended.set()
        return response

    async def to_internal(_: web.Request) -> web.Response:
        target = f"http://127.0.0.1:{state['site'].internal_port}/admin"
        raise web.HTTPFound(target)

    async def echo_host(request: web.Request) -> web.Response:
        return web.Response(text=f"host={request.host}", content_type="text/plain")

    async def binary(_: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG....", content_type="image/png")

    async def relative(_: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/article")

    app.router.add_get("/article", article)
    app.router.add_get("/big", big)
    app.router.add_get("/to-internal", to_internal)
    app.router.add_get("/host", echo_host)
    app.router.add_get("/logo.png", binary)
    app.router.add_get("/old", relative)
    runners = []
    ports = []
    for application in (app, internal):
        runner = web.AppRunner(application)
        await runner.setup()
        tcp = web.TCPSite(runner, "127.0.0.1", 0)
        await tcp.start()
        runners.append(runner)
        ports.append(tcp._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    state["site"] = Site(port=ports[0], internal_port=ports[1])
    try:
        yield state["site"]
    finally:
        for runner in runners:
            await runner.cleanup()


def _fetch(site: Site, **config: Any) -> Tool:
    settings = {"allow_hosts": [f"127.0.0.1:{site.port}"], **config}
    return web_fetch_tool(WebFetchConfig.model_validate(settings))


async def _run(tool: Tool, principal: Principal, **args: Any) -> str:
    registry = ToolRegistry([tool])
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": tool.spec.name, "arguments": json.dumps(args)},
    }
    return await registry.run(call, ToolContext(session_id="s", principal=principal))


async def test_an_article_becomes_its_main_text_without_menus(site: Site) -> None:
    text = await _run(_fetch(site), REMOTE, url=site.url("/article"))
    assert "forty family groups" in text and "fish ladders" in text
    assert "Otters of the Elbe" in text
    assert "Cookie settings" not in text and "Log in" not in text
    assert text.startswith(f"URL: {site.url('/article')} (HTTP 200)")


async def test_a_ten_megabyte_page_is_read_only_up_to_the_cap(site: Site) -> None:
    """max_bytes 200 KB: the result says it was cut, and the server could not push the whole
    10 MB (the client stopped reading; the send ended early)."""
    text = await _run(_fetch(site, max_bytes=200_000), OPERATOR, url=site.url("/big"))
    assert "Only the first 200,000 bytes of a longer page were read." in text
    # The handler learns of the closed connection at its next write: wait for that, not a guess.
    await asyncio.wait_for(site.big_ended.wait(), timeout=10)
    assert site.big_bytes_sent and site.big_bytes_sent[0] < TEN_MB


async def test_a_redirect_to_loopback_is_refused_for_a_remote_principal(site: Site) -> None:
    """The site itself is allowed (host:port), its redirect to another loopback port is not:
    refused, and the internal service never sees a request."""
    text = await _run(_fetch(site, allow_private=True), REMOTE, url=site.url("/to-internal"))
    assert text.startswith("Error: refused to fetch 127.0.0.1:"), text
    assert "a loopback address" in text
    assert site.internal_hits == []


async def test_the_same_redirect_is_followed_for_the_terminal_user_who_allowed_private(
    site: Site,
) -> None:
    text = await _run(_fetch(site, allow_private=True), OPERATOR, url=site.url("/to-internal"))
    assert "internal admin page" in text
    assert site.internal_hits == ["/admin"]


async def test_the_terminal_user_without_allow_private_is_refused_too(site: Site) -> None:
    internal = f"http://127.0.0.1:{site.internal_port}/x"
    text = await _run(_fetch(site), OPERATOR, url=internal)
    assert "a loopback address" in text and site.internal_hits == []


async def test_a_name_is_checked_after_resolution(site: Site) -> None:
    """`localhost` is not an address, but it resolves to loopback: refused (the allowed pair
    is 127.0.0.1:port, not localhost:port)."""
    text = await _run(_fetch(site), REMOTE, url=site.url("/article", host="localhost"))
    assert "resolves to" in text and ("127.0.0.1" in text or "::1" in text)


async def test_the_request_goes_to_the_checked_address_with_the_real_host(site: Site) -> None:
    """A resolver says `news.example` is 127.0.0.1 (allowed as news.example:port): the
    connection goes to that address and the Host header still names the site."""

    async def resolve(host: str, port: int) -> list[str]:
        assert host == "news.example"
        return ["127.0.0.1"]

    config = WebFetchConfig(allow_hosts=[f"news.example:{site.port}"])
    tool = web_fetch_tool(config, resolve=resolve)
    text = await _run(tool, REMOTE, url=f"http://news.example:{site.port}/host")
    assert f"host=news.example:{site.port}" in text


async def test_a_relative_redirect_is_resolved_and_checked_again(site: Site) -> None:
    text = await _run(_fetch(site), REMOTE, url=site.url("/old"))
    assert "forty family groups" in text
    assert f"URL: {site.url('/article')}" in text


async def test_binary_content_and_odd_schemes_are_refused(site: Site) -> None:
    tool = _fetch(site)
    assert "image/png, not a text page" in await _run(tool, REMOTE, url=site.url("/logo.png"))
    assert "only http and https" in await _run(tool, REMOTE, url="file:///etc/passwd")
    assert "only http and https" in await _run(tool, REMOTE, url="gopher://127.0.0.1/")
    assert "web_fetch needs" in await _run(tool, REMOTE, url="")


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("192.168.0.10", "a private address"),
        ("172.16.5.4", "a private address"),
        ("169.254.169.254", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("fd00::1", "a private address"),
        ("100.64.0.1", "a non-public address"),
        ("0.0.0.0", "a private address"),
        ("93.184.215.14", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_which_addresses_are_internal(address: str, problem: str | None) -> None:
    """The address check, after DNS: anything not globally routable is refused."""
    assert address_problem(address) == problem


@pytest.fixture
async def searxng() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """A fake SearXNG: `/search` answers JSON only when asked for `format=json`."""
    seen: list[dict[str, str]] = []

    async def search(request: web.Request) -> web.Response:
        seen.append(dict(request.query))
        if request.query.get("format") != "json":
            return web.Response(status=403, text="format not allowed")
        query = request.query.get("q", "")
        if query == "boom":
            return web.Response(status=500)
        results = [
            {
                "title": f"Result {i} for {query}",
                "url": f"https://r{i}.example/",
                "content": f"snippet {i}",
            }
            for i in range(1, 9)
        ]
        return web.json_response({"query": query, "results": results})

    app = web.Application()
    app.router.add_get("/search", search)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/", seen
    finally:
        await runner.cleanup()


async def test_web_search_through_searxng(searxng: tuple[str, list[dict[str, str]]]) -> None:
    """The query reaches SearXNG as q with format=json; the model gets max_results hits."""
    url, seen = searxng
    config = WebSearchConfig(backend="searxng", url=url, max_results=3)
    tool = web_search_tool(search_backend(config, {}), config)
    text = await _run(tool, OPERATOR, query="otters élbe")
    assert seen == [{"q": "otters élbe", "format": "json"}]
    assert text.splitlines()[0] == "1. Result 1 for otters élbe"
    assert "https://r3.example/" in text and "r4.example" not in text
    failed = await _run(tool, OPERATOR, query="boom")
    assert failed == "Error: SearXNG answered HTTP 500"


async def test_keyed_backends_without_a_key_say_which_variable_to_set() -> None:
    for backend, env in (("brave", "BRAVE_API_KEY"), ("tavily", "TAVILY_API_KEY")):
        config = WebSearchConfig.model_validate({"backend": backend})
        tool = web_search_tool(search_backend(config, {}), config)
        assert env in await _run(tool, OPERATOR, query="x")


def test_the_keyless_default_is_ddgs_and_it_is_installed() -> None:
    import ddgs  # noqa: F401  (the default must import; searching it needs the internet)

    assert search_backend(WebSearchConfig(), {}).name == "DuckDuckGo"
    assert isinstance(
        search_backend(WebSearchConfig(backend="searxng", url="http://x/"), {}), SearxngBackend
    )


async def test_an_international_name_is_resolved_in_its_ascii_form(site: Site) -> None:
    """`bücher.example` is looked up (and sent as Host) as `xn--bcher-kva.example`."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    config = WebFetchConfig(allow_hosts=[f"xn--bcher-kva.example:{site.port}"])
    text = await _run(
        web_fetch_tool(config, resolve=resolve),
        REMOTE,
        url=f"http://bücher.example:{site.port}/host",
    )
    assert asked == ["xn--bcher-kva.example"]
    assert f"host=xn--bcher-kva.example:{site.port}" in text
