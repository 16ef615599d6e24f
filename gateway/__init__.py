"""Chat gateways: platform adapters, chat-to-session routing, ordering, commands and hygiene."""

from __future__ import annotations

__all__: list[str] = []
