"""Carry out a parsed chat command: one reply text, and what the runner should do next.

Commands read the runner through `CommandContext` and return a `CommandResult`; the runner
applies its `effect` (re-route the chat, follow a compaction), so nothing here calls back in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias, assert_never

from agent.access import Principal
from agent.errors import CompactionRefused, HermesError
from agent.pricing import format_usage_summary
from agent.providers.base import Usage
from agent.session_meta import write_model
from gateway.commands import HELP_TEXT, Command
from gateway.platforms.base import InboundMessage
from state import Instruction, SessionInfo, SessionStore

if TYPE_CHECKING:
    from agent.agent import AIAgent
    from agent.config import HermesConfig

__all__ = [
    "CommandContext",
    "CommandEffect",
    "CommandResult",
    "Compacted",
    "Rerouted",
    "ledger_text",
    "run_command",
    "status_text",
]


class CommandContext(Protocol):
    """What a command may read of the runner; it changes nothing there itself."""

    @property
    def config(self) -> HermesConfig: ...

    @property
    def store(self) -> SessionStore: ...

    @property
    def default_context_length(self) -> int: ...

    async def agent_for(self, session_id: str) -> AIAgent: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Rerouted:
    """The chat now talks to `session_id` (after `/new`); the old session's agent can go."""

    session_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Compacted:
    """`agent` compacted; under legacy rotation it may now hold a new session id."""

    agent: AIAgent


CommandEffect: TypeAlias = Rerouted | Compacted | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    """A command's answer, and what the runner should do about it."""

    reply: str
    effect: CommandEffect = None


async def run_command(
    ctx: CommandContext,
    command: Command,
    message: InboundMessage,
    session_id: str,
    key: str,
    *,
    principal: Principal,
) -> CommandResult:
    store = ctx.store
    match command.name:
        case "help":
            return CommandResult(reply=HELP_TEXT)
        case "new":
            fresh = await store.start_new_for_chat(
                message.chat.platform, key, user_id=message.user_id, model=ctx.config.model.default
            )
            return CommandResult(
                reply=f"Started a new session ({fresh.id}). The previous one stays searchable.",
                effect=Rerouted(session_id=fresh.id),
            )
        case "compress":
            agent = await ctx.agent_for(session_id)
            try:
                result = await agent.compress(focus=command.argument or None, reason="manual")
            except CompactionRefused as exc:
                return CommandResult(reply=f"Nothing compacted: {exc.reason}")
            return CommandResult(
                reply=(
                    f"Compacted: {result.messages_before} → {result.messages_after} messages, "
                    f"{result.tokens_before:,} → {result.tokens_after:,} tokens."
                ),
                effect=Compacted(agent=agent),
            )
        case "status":
            agent = await ctx.agent_for(session_id)
            info = await store.get_session(agent.session_id)
            return CommandResult(reply=status_text(agent, info, ctx.config))
        case "model":
            return CommandResult(reply=await _switch_model(ctx, command, principal, session_id))
        case "sessions":
            return CommandResult(reply=await _list_sessions(store, message, session_id, key))
        case "pin":
            return CommandResult(reply=await _pin(await ctx.agent_for(session_id), command))
        case "pins":
            agent = await ctx.agent_for(session_id)
            history = await store.list_instructions(agent.session_id, include_inactive=True)
            return CommandResult(reply=ledger_text((await agent.ledger()).entries, history))
        case "unpin":
            return CommandResult(reply=await _unpin(await ctx.agent_for(session_id), command))
        case unreachable:
            assert_never(unreachable)


def status_text(agent: AIAgent, info: SessionInfo | None, config: HermesConfig) -> str:
    """Model, tokens, occupancy, compactions, cache hits and cost of one session."""
    status = agent.engine.status()
    threshold, window = status.threshold_tokens, status.context_length
    tokens = (
        (agent.last_usage.prompt_tokens if agent.last_usage else 0)
        or (info.last_prompt_tokens if info is not None else 0)
        or agent.engine.current_tokens(agent.transcript)
    )
    occupancy = f"{100 * tokens / threshold:.0f}% of the compaction threshold" if threshold else "?"
    totals = info.usage if info is not None else Usage()
    lines = [
        f"Session {agent.session_id} · model {agent.model}",
        f"Context: {tokens:,} tokens of {window:,} ({occupancy})",
        f"Compactions: {info.compactions if info else 0} batch, "
        f"{info.micro_compactions if info else 0} micro",
        format_usage_summary(totals, agent.model, config.pricing),
    ]
    return "\n".join(lines)


def ledger_text(entries: Sequence[Instruction], history: Sequence[Instruction] = ()) -> str:
    """`/pins`: the numbered standing instructions, with where each came from and what it
    replaced (`history` holds the retired entries)."""
    if not entries:
        return (
            "No standing instructions yet. They are picked up from messages such as "
            '"always …", "never …", "don\'t …", "use X, not Y", or added with /pin TEXT.'
        )
    by_id = {i.id: i for i in history}
    lines = ["Standing instructions (kept word for word through compaction):"]
    for number, entry in enumerate(entries, start=1):
        origin = "pinned" if entry.kind == "pin" else f"from message #{entry.source_message_id}"
        old = by_id.get(entry.supersedes_id) if entry.supersedes_id else None
        replaced = f"; replaces “{old.text}”" if old is not None else ""
        lines.append(f"{number}. {entry.text}  ({origin}{replaced})")
    lines.append("/unpin N drops one.")
    return "\n".join(lines)


async def _pin(agent: AIAgent, command: Command) -> str:
    change = await agent.pin(command.argument)
    if change.refused:
        return f"Nothing pinned: {change.refused}."
    if change.repeated and not change.added:
        return "Already a standing instruction; see /pins."
    replaced = f" It replaces: {change.superseded[0].text}" if change.superseded else ""
    return f"Pinned. It stays word for word in every request from now on.{replaced}"


async def _unpin(agent: AIAgent, command: Command) -> str:
    raw = command.argument.strip().lstrip("#")
    if not raw.isdigit():
        return "Use /unpin N with the number /pins shows."
    removed = await agent.unpin(int(raw))
    if removed is None:
        return f"There is no standing instruction number {int(raw)}; see /pins."
    return f"Dropped: {removed.text}"


async def _switch_model(
    ctx: CommandContext, command: Command, principal: Principal, session_id: str
) -> str:
    from agent.providers.context_window import context_length_for

    if not principal.admin:
        return "Only an admin can switch the model."
    name = command.argument.strip()
    agent = await ctx.agent_for(session_id)
    if not name:
        return f"Current model: {agent.model}. Use /model NAME to switch."
    window = context_length_for(name, None) or ctx.default_context_length
    try:
        agent.switch_model(name, window)
    except HermesError as exc:
        return f"Could not switch: {exc}"
    await write_model(ctx.store, session_id, name)
    return (
        f"Switched to {name} ({window:,}-token window). Note: the prompt cache starts cold, so "
        "the next reply re-reads the whole conversation at full price."
    )


async def _list_sessions(
    store: SessionStore, message: InboundMessage, session_id: str, key: str
) -> str:
    sessions = await store.list_sessions(limit=200, platform=message.chat.platform)
    mine = [s for s in sessions if s.chat_key == key][:5]
    if not mine:
        return "No sessions yet."
    lines = [f"{'→' if s.id == session_id else ' '} {s.id}  {s.title or ''}" for s in mine]
    return "Sessions of this chat (newest first):\n" + "\n".join(lines)
