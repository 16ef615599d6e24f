"""The loopback guard itself: a test must not be able to reach the outside world."""

from __future__ import annotations

import socket

import pytest


def test_connect_outside_loopback_is_refused() -> None:
    """Connecting to a public address fails before any packet is sent."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(ConnectionRefusedError, match="loopback"):
            s.connect(("192.0.2.1", 80))
    finally:
        s.close()
