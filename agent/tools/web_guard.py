"""Where `web_fetch` may connect: public addresses only, checked after DNS and pinned.

A chat user must not make the gateway fetch its own admin page, the cloud metadata service or a
database on the LAN. So every hop (the first URL and each redirect) is resolved here, every
address the name resolves to must be public (`ipaddress`'s `is_global`: no private, loopback,
link-local, CGNAT, multicast or reserved ranges; IPv4-mapped IPv6 is unwrapped first), and the
request then goes to the address that was checked, not to the name again (no DNS rebinding
between check and connect). Exceptions: `allow_private` (the terminal user only) and the exact
`host:port` pairs of `web.fetch.allow_hosts`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent.errors import ToolError

__all__ = ["PinnedTarget", "Resolver", "address_problem", "pin_target", "system_resolver"]

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""host, port -> the IP addresses a connection would use."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PinnedTarget:
    """One hop, checked: connect to `address`, but speak to `host` (Host header, TLS SNI)."""

    url: str
    scheme: str
    host: str
    port: int
    address: str


def address_problem(address: str) -> str | None:
    """Why connecting to `address` could reach something internal, or None if it is public."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a non-public address"
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def pin_target(
    url: str,
    *,
    allow_private: bool,
    allow_hosts: Sequence[str],
    resolve: Resolver = system_resolver,
) -> PinnedTarget:
    """Check `url` and resolve it to one address it is allowed to reach; ToolError if not."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs can be fetched, not {scheme or 'no scheme'!r}")
    host = (parts.hostname or "").lower()
    if not host:
        raise ToolError(f"the URL {url!r} has no host")
    try:  # an international name goes on the wire (DNS, Host, SNI) in its ASCII form
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise ToolError(f"the host of {url!r} is not a valid name") from None
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise ToolError(f"the URL {url!r} has a bad port") from None
    try:
        addresses = await resolve(host, port)
    except OSError as exc:
        raise ToolError(f"cannot resolve {host}: {exc.strerror or exc}") from None
    if not addresses:
        raise ToolError(f"cannot resolve {host}")
    listed = _host_port(host, port) in {h.lower() for h in allow_hosts}
    if not (allow_private or listed):
        for address in addresses:
            if (problem := address_problem(address)) is not None:
                raise ToolError(
                    f"refused to fetch {host}:{port}: it resolves to {address}, {problem}; "
                    "only public addresses can be fetched"
                )
    return PinnedTarget(url=url, scheme=scheme, host=host, port=port, address=addresses[0])


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
