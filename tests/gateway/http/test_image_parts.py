"""Which addresses an https image may come from, and data URLs decoded within the limit."""

from __future__ import annotations

import base64

import pytest

from agent.errors import MediaRefused
from gateway.http.image_parts import decode_data_url, is_public_address


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", True),
        ("127.0.0.1", False),
        ("10.0.0.8", False),
        ("172.16.5.4", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # cloud metadata
        ("100.64.0.1", False),  # carrier-grade NAT
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1%eth0", False),
        ("fc00::1", False),
        ("::ffff:127.0.0.1", False),  # IPv4-mapped loopback
        ("224.0.0.1", False),
        ("not-an-ip", False),
    ],
)
def test_only_global_addresses_are_public(address: str, public: bool) -> None:
    """Loopback, private, link-local, shared, mapped and multicast addresses are never fetched."""
    assert is_public_address(address) is public


def test_data_url_round_trip() -> None:
    """A base64 data URL gives back its bytes."""
    assert decode_data_url("data:image/png;base64," + base64.b64encode(b"abc").decode()) == b"abc"


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("data:image/png,rawtext", 400),
        ("data:image/png;base64,***", 400),
        ("data:image/png;base64," + "A" * (28 * 1024 * 1024), 413),
    ],
)
def test_bad_data_urls(url: str, status: int) -> None:
    """Not base64, bad base64, or over 20 MB (judged before decoding)."""
    with pytest.raises(MediaRefused) as caught:
        decode_data_url(url)
    assert caught.value.status == status
