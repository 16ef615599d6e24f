"""An httpx2 transport that delivers one public host's requests to the fake, Host header intact.

The SDKs then build real URLs (https://api.openai.com/v1/responses, https://chatgpt.com/...),
so route gates in the runtime see what they would see in production, and the fake learns the
Host a request was addressed to. Imported only by `FakeLLM.http_client_for`.
"""

from __future__ import annotations

import httpx2

__all__ = ["HostRedirect"]


class HostRedirect(httpx2.AsyncBaseTransport):
    """Requests for `expected_host` go to 127.0.0.1:`port`; any other host fails to connect."""

    def __init__(self, port: int, expected_host: str) -> None:
        self._port = port
        self._expected = expected_host
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.host != self._expected:
            raise httpx2.ConnectError(f"fake transport only serves {self._expected}")
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self._port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
