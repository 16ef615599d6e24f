"""The terminal's words as plain text: what `hermes chat -q` prints and the chat shows.

Pure functions, no terminal library: the one-shot prints these to a pipe or a terminal without
loading the interactive chat's renderer (`terminal_render`, rich markdown, prompt_toolkit).

What the model writes (and the tool output it echoes) is inert on the terminal: `inert_text`
shows control characters as visible symbols (`ESC]52;c;…`, a clipboard write, becomes
`␛]52;c;…`), so a reply cannot set the clipboard, retitle the window or move the cursor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.events import CompactionCommitted

__all__ = ["compaction_line", "compaction_line_of", "format_tokens", "inert_text", "resume_hint"]


_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
_INERT = str.maketrans(
    {
        **{c: chr(0x2400 + c) for c in range(0x20) if chr(c) not in "\n\t"},
        0x7F: "\u2421",
        **{c: f"<U+{c:04X}>" for c in (*range(0x80, 0xA0), *_BIDI)},
    }
)


def inert_text(text: str) -> str:
    """`text` with every control character (C0 but newline and tab, DEL, C1, bidi overrides)
    shown as a visible symbol instead of acting on the terminal; CRLF becomes a newline."""
    return text.replace("\r\n", "\n").translate(_INERT)


def resume_hint(session_id: str) -> str:
    """What to type to come back to this chat."""
    return f"resume with: hermes chat --resume {session_id}"


def format_tokens(tokens: int) -> str:
    """`950`, `9K`, `38K`, `1.2M`: a token count at a glance."""
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:.1f}M"
    if tokens >= 1_000:
        return f"{tokens / 1_000:.0f}K"
    return str(tokens)


def compaction_line(
    *,
    messages_before: int,
    messages_after: int,
    tokens_before: int,
    tokens_after: int,
    seconds: float,
) -> str:
    """`compacted 41 → 12 messages, 38K → 9K tokens, 3.1 s`: one line after a compaction."""
    return (
        f"compacted {messages_before} → {messages_after} messages, "
        f"{format_tokens(tokens_before)} → {format_tokens(tokens_after)} tokens, {seconds:.1f} s"
    )


def compaction_line_of(event: CompactionCommitted) -> str:
    """`compaction_line` for a committed compaction."""
    return compaction_line(
        messages_before=event.messages_before,
        messages_after=event.messages_after,
        tokens_before=event.tokens_before,
        tokens_after=event.tokens_after,
        seconds=event.seconds,
    )
