"""Platform adapters: each turns one chat service's updates into `InboundMessage`s and sends replies."""

from __future__ import annotations

__all__: list[str] = []
