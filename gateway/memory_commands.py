"""`/memory` and `/forget N`: the person sees what Hermes remembers about them and erases it.

Both act on the memory of the principal who typed them (`Principal.owner`), through a view
bound to that owner, and only in a conversation nobody else reads (a direct chat, the
terminal, an HTTP key): in a group, they answer without showing anything.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agent.access import Principal
from agent.config import MemoryConfig
from agent.errors import StoreError
from agent.memory.tool import parse_entry_id
from agent.memory.view import OwnerMemory
from gateway.platforms.base import InboundMessage
from gateway.routing import memory_owner
from state import MemoryEntry, MemoryStore

__all__ = ["MAX_SHOWN", "forget_text", "memory_text", "render_listing"]

MAX_SHOWN = 60
"""`/memory` lists at most this many entries (the newest notes); the CLI lists all."""
OFF = "Memory is off on this Hermes (memory.enabled: false)."
NOT_HERE = "Your memory is shown only in a direct chat with me, never in a group."


def _view(
    store: MemoryStore | None, config: MemoryConfig, message: InboundMessage, who: Principal
) -> OwnerMemory | str:
    if store is None or not config.enabled:
        return OFF
    owner = memory_owner(message, who.owner)
    if owner is None:
        return NOT_HERE
    return OwnerMemory(store, owner, profile_max_tokens=config.profile_max_tokens)


async def memory_text(
    store: MemoryStore | None, config: MemoryConfig, message: InboundMessage, who: Principal
) -> str:
    """`/memory`: the profile and the notes, numbered by entry."""
    view = _view(store, config, message, who)
    if isinstance(view, str):
        return view
    try:
        entries = await view.entries()
    except StoreError as exc:
        return f"Memory is unavailable right now: {exc}"
    return render_listing(entries, limit=MAX_SHOWN)


async def forget_text(
    store: MemoryStore | None,
    config: MemoryConfig,
    message: InboundMessage,
    who: Principal,
    argument: str,
) -> str:
    """`/forget N`: erase entry N of this person's memory."""
    view = _view(store, config, message, who)
    if isinstance(view, str):
        return view
    entry_id = parse_entry_id(argument)
    if entry_id is None:
        return "Use /forget N with a number /memory shows."
    try:
        gone = await view.forget(entry_id)
    except StoreError as exc:
        return f"Nothing forgotten: memory is unavailable right now ({exc})."
    if gone is None:
        return f"Nothing is remembered as {entry_id}; /memory lists what is."
    return (
        f"Forgot {entry_id}: {gone.text}\n"
        "It is gone from search and from your next conversations (a conversation in progress "
        "keeps it until its context is next compacted)."
    )


def render_listing(entries: list[MemoryEntry], *, limit: int) -> str:
    """The numbered listing `/memory` and `hermes memory list` show."""
    if not entries:
        return (
            'I remember nothing about you yet. Tell me what to keep ("remember that ..."), '
            "or it is picked up when older parts of a conversation are summarized."
        )
    profile = [e for e in entries if e.kind == "profile"]
    notes = [e for e in entries if e.kind == "note"]
    shown_notes = notes[-max(0, limit - len(profile)) :] if limit else notes
    lines: list[str] = []
    if profile:
        lines.append("Profile (in every new conversation):")
        lines += [_line(e) for e in profile]
    if notes:
        lines.append("Notes (offered when they bear on what you ask):")
        if len(shown_notes) < len(notes):
            lines.append(f"({len(notes) - len(shown_notes)} older notes not shown)")
        lines += [_line(e) for e in shown_notes]
    lines.append("/forget N erases one.")
    return "\n".join(lines)


def _line(entry: MemoryEntry) -> str:
    day = datetime.fromtimestamp(entry.created_at, tz=UTC).strftime("%Y-%m-%d")
    origin = {
        "tool": "you told me",
        "compaction": "from a summarized conversation",
        "ledger": "from a standing instruction",
        "user": "added by you",
    }[entry.origin]
    return f"{entry.id}. {entry.text}  ({day}, {origin})"
