"""One session's standing-instructions ledger: in memory, written through to the store.

The agent feeds it every user message once stored (`observe`), and `/pin`, `/pins` and
`/unpin N` reach it through the agent. The rules are pure (`agent.ledger.detect`,
`agent.ledger.rules`); this is the thin shell that applies them and keeps the store in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

import structlog

from agent.ledger.detect import MAX_DIRECTIVE_CHARS, detect_directives
from agent.ledger.rules import MAX_ACTIVE_ENTRIES, Addition, Repeat, plan_entry
from agent.messages import ChatMessage, content_text, is_real_user_message
from agent.redaction import redact_text
from state.contract import InstructionLedger
from state.values import Instruction, InstructionKind

__all__ = ["LedgerChange", "SessionLedger"]

log = structlog.get_logger(__name__)

MAX_PIN_CHARS = 2 * MAX_DIRECTIVE_CHARS


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerChange:
    """What one observation or pin did."""

    added: tuple[Instruction, ...] = ()
    superseded: tuple[Instruction, ...] = ()
    repeated: tuple[Instruction, ...] = ()
    refused: str = ""
    """Why nothing was added (a full ledger, an empty or oversized pin)."""


class SessionLedger:
    """The active entries of one session, oldest first. Build with `await SessionLedger.load`."""

    def __init__(
        self, store: InstructionLedger, session_id: str, entries: list[Instruction]
    ) -> None:
        self._store = store
        self.session_id = session_id
        self._entries = entries

    @classmethod
    async def load(cls, store: InstructionLedger, session_id: str) -> SessionLedger:
        return cls(store, session_id, await store.list_instructions(session_id))

    @property
    def entries(self) -> tuple[Instruction, ...]:
        return tuple(self._entries)

    async def observe(self, message: ChatMessage) -> LedgerChange:
        """Record the standing instructions of a stored user message (its row is the source)."""
        if not is_real_user_message(message):
            return LedgerChange()
        found = detect_directives(content_text(message))
        if not found:
            return LedgerChange()
        row_id = message.get("_id")
        source = row_id if isinstance(row_id, int) and not isinstance(row_id, bool) else None
        change = LedgerChange()
        for text in found:
            change = _merged(change, await self._add(text, kind="detected", source=source))
        if change.added:
            log.info(
                "ledger_updated",
                session_id=self.session_id,
                added=len(change.added),
                superseded=len(change.superseded),
            )
        return change

    async def pin(self, text: str) -> LedgerChange:
        """`/pin TEXT`: keep `text` verbatim as a standing instruction."""
        cleaned = " ".join(text.split())
        if not cleaned:
            return LedgerChange(refused="nothing to pin: write /pin followed by the instruction")
        if len(cleaned) > MAX_PIN_CHARS:
            return LedgerChange(refused=f"a pin holds at most {MAX_PIN_CHARS} characters")
        return await self._add(cleaned, kind="pin", source=None)

    async def remove(self, number: int) -> Instruction | None:
        """`/unpin N`: retire the N-th active entry (1 = oldest); None when there is none."""
        if not 1 <= number <= len(self._entries):
            return None
        entry = self._entries[number - 1]
        if await self._store.remove_instruction(self.session_id, entry.id):
            self._entries.remove(entry)
            return entry
        self._entries = await self._store.list_instructions(self.session_id)
        return None

    async def _add(self, text: str, *, kind: InstructionKind, source: int | None) -> LedgerChange:
        text = redact_text(text)  # a copy of what the user said, like a summary: no keys
        match plan_entry(self._entries, text):
            case Repeat(entry=entry):
                return LedgerChange(repeated=(entry,))
            case Addition(supersedes=replaced):
                if replaced is None and len(self._entries) >= MAX_ACTIVE_ENTRIES:
                    log.warning("ledger_full", session_id=self.session_id)
                    return LedgerChange(
                        refused=f"the ledger is full ({MAX_ACTIVE_ENTRIES}); /unpin some first"
                    )
                entry = await self._store.add_instruction(
                    self.session_id,
                    text,
                    kind=kind,
                    source_message_id=source,
                    supersedes_id=replaced.id if replaced else None,
                )
                if replaced is None:
                    self._entries.append(entry)
                    return LedgerChange(added=(entry,))
                if entry.supersedes_id != replaced.id:  # retired meanwhile: reread the ledger
                    self._entries = await self._store.list_instructions(self.session_id)
                    return LedgerChange(added=(entry,))
                self._entries.remove(replaced)
                self._entries.append(entry)
                return LedgerChange(added=(entry,), superseded=(replaced,))
            case unreachable:
                assert_never(unreachable)


def _merged(a: LedgerChange, b: LedgerChange) -> LedgerChange:
    return LedgerChange(
        added=a.added + b.added,
        superseded=a.superseded + b.superseded,
        repeated=a.repeated + b.repeated,
        refused=b.refused or a.refused,
    )
