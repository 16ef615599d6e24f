"""Compaction the user can see and take back: a receipt after each batch compaction in a chat,
`/bringback` (archived rows back into context) and `/uncompact` (undo the last compaction).

A receipt (`compression.receipt`: brief, full or off) says how many messages were set aside,
their anchor range, what stayed, and how many tokens (and dollars, when the model's price is
known) each request saves. The session's meta keeps what the active set was before the last
compaction (`last_compaction`), so `/uncompact` can make exactly those rows active again in one
store transaction (`Transcript.restore_active`), less any the user took back since with
`/retry` or `/undo` (`archived_by`), refused with a sentence when the result would not fit the
model's window. Only an in-place compaction can be undone: after a rotation into a new session
(`compression.in_place: false`) or one by the model's server, `/uncompact` says so.
`/bringback` reads a range of archived rows verbatim (as the `recall` tool does) and adds it to
the transcript as an exchange, so the next requests carry it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from agent.archive.anchors import Anchor, anchors_for_ids, parse_anchor
from agent.archive.recall import read_anchor
from agent.compaction.threshold import MIN_REQUEST_OUTPUT_TOKENS, estimate_margin
from agent.errors import ConcurrentModification
from agent.messages import ChatMessage, assistant_message, user_message
from agent.pricing import TOKENS_PER_PRICE_UNIT, price_for
from agent.session_meta import LastCompaction, read_meta, write_last_compaction
from gateway.commands import Command
from gateway.reply import ReplySink
from state import SessionInfo, SessionView

if TYPE_CHECKING:
    from agent.agent import AIAgent
    from agent.config import HermesConfig

__all__ = [
    "Receipt",
    "active_ids",
    "bring_back",
    "note_compaction",
    "ButtonSink",
    "receipt_buttons",
    "receipt_mode",
    "send_receipt",
    "receipt_text",
    "uncompact",
]

NOTHING_TO_UNDO = "Nothing to undo: no compaction since the last one was undone (or ever)."
ROTATED = (
    "That compaction can't be undone: it started this session from a summary of session "
    "{parent} (compression.in_place is off), and a conversation moved on is not moved back. "
    "Nothing changed; every earlier message is kept whole in {parent} "
    "(hermes sessions show {parent})."
)
COMPACTED_BY_SERVER = (
    "That compaction can't be undone: the model's own server compacted its thread (the Codex "
    "app-server) and keeps no copy to restore. Nothing changed."
)
TAKEN_BACK = frozenset({"retry", "undo"})
"""Rows set aside for these reasons stay aside when a compaction is undone: the user took them
back after the compaction (`gateway.take_back`)."""
FULL_LINES = 12
"""`compression.receipt: full` lists at most this many of the set-aside user messages."""
BRING_BACK_CHARS = 12_000
"""`/bringback` brings back at most this much text at once (the rest: a narrower range)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """What one batch compaction did, as the user is told."""

    set_aside: int
    anchors: tuple[Anchor, ...]
    kept: int
    pinned: int
    tokens_saved: int
    usd_saved: float | None
    first_lines: tuple[str, ...] = ()


def receipt_mode(config: HermesConfig, platform: str) -> Literal["brief", "off", "full"]:
    """`compression.receipt` in Telegram and Discord chats; elsewhere "off" (the terminal and
    the HTTP API keep their one-line notice; `/uncompact` works everywhere all the same)."""
    return config.compression.receipt if platform in ("telegram", "discord") else "off"


async def send_receipt(sink: ReplySink, receipt: str) -> None:
    """The receipt, with "Bring back" and "Undo compaction" buttons where the chat has them."""
    if isinstance(sink, ButtonSink):
        await sink.notice_with_buttons(receipt, receipt_buttons(receipt))
    else:
        await sink.notice(receipt)


def receipt_buttons(receipt: str) -> list[tuple[str, str]]:
    """The receipt's commands as buttons (its last line names the range)."""
    bring = receipt.rsplit("\n", 1)[-1].split(" brings", 1)[0]
    return [("📥 Bring back", bring), ("↩️ Undo compaction", "/uncompact")]


@runtime_checkable
class ButtonSink(Protocol):
    """A reply sink that can put command buttons under a note (`PlatformReplySink`)."""

    async def notice_with_buttons(self, text: str, buttons: Sequence[tuple[str, str]]) -> None: ...


def active_ids(transcript: Sequence[ChatMessage]) -> list[int]:
    """The stored row ids of a transcript, in order (messages not yet stored have none)."""
    return [m["_id"] for m in transcript if isinstance(m.get("_id"), int)]


def receipt_text(receipt: Receipt, *, full: bool) -> str:
    """Pure: the one message a chat gets after a compaction."""
    span = _span(receipt.anchors)
    money = f" (≈${receipt.usd_saved:.2f})" if receipt.usd_saved else ""
    pinned = (
        f", {receipt.pinned} standing instruction{'s' if receipt.pinned != 1 else ''}"
        if receipt.pinned
        else ""
    )
    lines = [
        f"🗜️ Compacted: {receipt.set_aside} earlier messages set aside ({span}) and summarized,"
        f" not deleted. Kept: the system prompt{pinned} and the newest"
        f" {receipt.kept} messages. ≈{max(receipt.tokens_saved, 0):,} tokens{money} fewer per"
        " request.",
    ]
    if full and receipt.first_lines:
        lines += ["Set aside:", *(f"• {line}" for line in receipt.first_lines)]
    lines.append(f"/bringback {_plain(span)} brings them back · /uncompact undoes it")
    return "\n".join(lines)


async def note_compaction(
    agent: AIAgent,
    before: Sequence[ChatMessage],
    info_before: SessionInfo | None,
    *,
    mode: Literal["brief", "off", "full"],
) -> str | None:
    """After a turn (holding the session's lock): if a batch compaction happened since
    `before` was the active set, remember it for `/uncompact` and return the receipt (None:
    no compaction, or receipts are off)."""
    store = agent.store
    info = await store.sessions.get_session(agent.session_id)
    if info is None or info_before is None or info.id != info_before.id:
        return None  # no session, or a rotating compaction moved it (nothing to undo in place)
    if info.compactions <= info_before.compactions:
        return None
    after_ids = set(active_ids(agent.transcript))
    before_ids = active_ids(before)
    gone = [m for m in before if isinstance(m.get("_id"), int) and m["_id"] not in after_ids]
    anchors = tuple(anchors_for_ids((m["_id"] for m in gone), breaks=after_ids))
    last = LastCompaction(before=tuple(before_ids), range=_plain(_span(anchors)))
    await write_last_compaction(store.meta, agent.session_id, last)
    if mode == "off":
        return None
    engine = agent.engine
    saved = engine.current_tokens(list(before)) - engine.current_tokens(agent.transcript)
    price = price_for(agent.model, agent.deps.config.pricing)
    usd = saved * price.input / TOKENS_PER_PRICE_UNIT if price is not None else None
    firsts = tuple(_first_line(m) for m in gone if m.get("role") == "user" and _first_line(m))[
        :FULL_LINES
    ]
    kept = sum(1 for m in agent.transcript if m.get("role") != "system")
    pinned = len((await agent.instructions.ledger()).entries)
    receipt = Receipt(
        set_aside=len(gone),
        anchors=anchors,
        kept=kept,
        pinned=pinned,
        tokens_saved=saved,
        usd_saved=usd,
        first_lines=firsts,
    )
    return receipt_text(receipt, full=mode == "full")


async def bring_back(agent: AIAgent, command: Command, reader: SessionView) -> str:
    """`/bringback [range]`: the range's rows, verbatim, join the transcript (as an exchange:
    the user's request and the archive's text), so the next requests carry them. The rows are
    read through `reader`, the caller's scoped view of the store."""
    store = agent.store
    wanted = command.argument.strip()
    if not wanted:
        last = (await read_meta(store.meta, agent.session_id)).last_compaction
        wanted = last.range if last is not None else ""
    anchor = parse_anchor(wanted.replace("–", "-").split(",")[0]) if wanted else None
    if anchor is None:
        return "Use /bringback with a range such as 12-40, as the compaction receipt shows."
    rows = await store.search.read_rows(
        agent.session_id, first_id=anchor.first, last_id=anchor.last, limit=1_000
    )
    if not any(not row.active for row in rows):
        return f"Nothing in {anchor} was set aside in this conversation; see the receipt's range."
    text = await read_anchor(
        reader, agent.session_id, anchor, budget=BRING_BACK_CHARS, tool="bringback"
    )
    asked = user_message(f"/bringback {anchor}: bring these set-aside messages back into context.")
    answer = assistant_message(f"Brought back from the archive, verbatim:\n\n{text}")
    if _would_overflow(agent, [*agent.transcript, asked, answer]):
        return f"{anchor} would not fit the model's window; bring back a narrower range."
    await agent.persist()
    agent.transcript.extend([asked, answer])
    await agent.persist()
    return f"📥 Brought {anchor} back into context; my next answers can use it."


async def uncompact(agent: AIAgent) -> str:
    """`/uncompact`: the active set before the last compaction comes back (plus what was said
    since), in one transaction; refused if it would not fit the window."""
    store = agent.store
    await agent.persist()
    last = (await read_meta(store.meta, agent.session_id)).last_compaction
    if last is None:
        return await _why_nothing_to_undo(agent)
    shown = await store.transcript.show(agent.session_id, include_archived=True)
    rows = {m["_id"]: m for m in shown}
    before = [i for i in last.before if rows.get(i, {}).get("_archived_by") not in TAKEN_BACK]
    since = [
        m["_id"]
        for m in agent.transcript
        if isinstance(m.get("_id"), int)
        and m["_id"] not in before
        and m.get("role") != "system"
        and m.get("_kind", "normal") == "normal"
    ]
    order = [*before, *since]
    restored = [rows[i] for i in order if i in rows]
    if len(restored) != len(order):
        return "The messages of that compaction are no longer all in this session; nothing changed."
    if _would_overflow(agent, restored):
        return (
            "Undoing the last compaction would not fit the model's window; nothing changed. "
            "/bringback a range instead."
        )
    try:
        archived = await store.transcript.restore_active(
            agent.session_id, order, expected_version=agent.known_version
        )
    except ConcurrentModification:
        return "The conversation changed meanwhile; nothing was undone. Try again."
    await write_last_compaction(store.meta, agent.session_id, None)
    await agent.sync_with_store()
    return (
        f"↩️ Compaction undone: {len(order)} messages are in context again "
        f"({archived} summary message(s) set aside)."
    )


async def _why_nothing_to_undo(agent: AIAgent) -> str:
    """No in-place compaction to undo: say why when another kind was the last one (a rotation
    into this session, or one done by the model's server), else that there is none."""
    sessions = agent.store.sessions
    info = await sessions.get_session(agent.session_id)
    parent = info.parent_session_id if info is not None else None
    parent_info = await sessions.get_session(parent) if parent else None
    if parent_info is not None and parent_info.end_reason == "compression":
        return ROTATED.format(parent=parent_info.id)
    if info is not None and info.native_compactions:
        return COMPACTED_BY_SERVER
    return NOTHING_TO_UNDO


def _would_overflow(agent: AIAgent, messages: list[ChatMessage]) -> bool:
    window = agent.engine.context_length
    tokens = agent.engine.current_tokens(messages)
    return tokens + MIN_REQUEST_OUTPUT_TOKENS + estimate_margin(window) > window


def _span(anchors: Sequence[Anchor]) -> str:
    if not anchors:
        return "no stored rows"
    return str(Anchor(first=anchors[0].first, last=anchors[-1].last))


def _plain(span: str) -> str:
    """`[#12–#40]` → `12-40` (what a person types after /bringback)."""
    return span.strip("[]").replace("#", "").replace("–", "-")


def _first_line(message: ChatMessage) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 80 else line[:79] + "…"
