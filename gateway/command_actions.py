"""Carry out a parsed chat command: one reply text, and what the runner should do next.

Commands read the runner through `CommandContext` and return a `CommandResult`; the runner
applies its `effect` (re-route the chat, follow a compaction), so nothing here calls back in.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias, assert_never

from agent.access import Principal, TurnAccess
from agent.errors import CompactionRefused, HermesError
from agent.pricing import format_usage_summary
from agent.providers.base import Usage
from agent.session_meta import write_model
from gateway.commands import Command, UnknownCommand, close_matches, help_text, start_text
from gateway.memory_commands import forget_text, memory_text
from gateway.platforms.base import InboundMessage
from gateway.receipts import bring_back, note_compaction, receipt_mode, uncompact
from gateway.take_back import take_back
from state import Instruction, MemoryStore, SessionInfo, SessionStore
from state.contract import SessionCatalog

if TYPE_CHECKING:
    from agent.agent import AIAgent
    from agent.config import HermesConfig

__all__ = [
    "CommandContext",
    "CommandEffect",
    "CommandResult",
    "Compacted",
    "Rerouted",
    "format_age",
    "has_conversation",
    "ledger_text",
    "run_command",
    "session_line",
    "status_text",
    "unknown_command_text",
]

SESSIONS_LISTED = 10
"""`/sessions` shows this many of the chat's newest sessions."""
NOTHING_TO_COMPACT = "Nothing to compact yet: the whole chat fits in the kept tail."


class CommandContext(Protocol):
    """What a command may read of the runner; it changes nothing there itself."""

    @property
    def config(self) -> HermesConfig: ...

    @property
    def store(self) -> SessionStore: ...

    @property
    def default_context_length(self) -> int: ...

    @property
    def memory(self) -> MemoryStore | None:
        """What Hermes remembers about people; None when memory is off."""
        ...

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
    command: Command | UnknownCommand,
    message: InboundMessage,
    session_id: str,
    key: str,
    *,
    access: TurnAccess,
) -> CommandResult:
    """Carry out `command` for the chat `key` (platform-prefixed) now on `session_id`, on
    behalf of `access` (sessions are listed, resumed and named only if they are its owner's)."""
    store = ctx.store
    principal, owner = access.principal, access.reads.owner
    if isinstance(command, UnknownCommand):
        return CommandResult(reply=unknown_command_text(command.name, message.chat.platform))
    match command.name:
        case "start":
            return CommandResult(reply=start_text(terminal=message.chat.platform == "terminal"))
        case "help":
            return CommandResult(reply=help_text(terminal=message.chat.platform == "terminal"))
        case "new":
            fresh = await store.sessions.start_new_for_chat(
                message.chat.platform,
                key,
                user_id=message.user_id,
                model=ctx.config.model.default,
                leaving=session_id,
                owner=owner,
            )
            return CommandResult(
                reply=f"Started a new session ({fresh.id}). The previous one stays searchable.",
                effect=Rerouted(session_id=fresh.id),
            )
        case "resume":
            return await _resume(
                store.sessions, command, message, session_id, key, principal, owner
            )
        case "title":
            named_by = None if principal.platform == "terminal" else owner  # the machine's owner
            return CommandResult(reply=await _title(store.sessions, command, session_id, named_by))
        case "compress":
            agent = await ctx.agent_for(session_id)
            before, info = list(agent.transcript), await store.sessions.get_session(session_id)
            try:
                result = await agent.compress(focus=command.argument or None, reason="manual")
            except CompactionRefused as exc:
                return CommandResult(reply=_refusal_text(exc.reason))
            mode = receipt_mode(ctx.config, message.chat.platform)
            receipt = await note_compaction(agent, before, info, mode=mode)
            return CommandResult(
                reply=(
                    f"Compacted: {result.messages_before} → {result.messages_after} messages, "
                    f"{result.tokens_before:,} → {result.tokens_after:,} tokens."
                )
                + (f"\n{receipt}" if receipt else ""),
                effect=Compacted(agent=agent),
            )
        case "status":
            agent = await ctx.agent_for(session_id)
            info = await store.sessions.get_session(agent.session_id)
            return CommandResult(reply=status_text(agent, info, ctx.config))
        case "model":
            return CommandResult(reply=await _switch_model(ctx, command, principal, session_id))
        case "sessions":
            return CommandResult(
                reply=await _list_sessions(store.sessions, message, session_id, key, owner)
            )
        case "pin":
            return CommandResult(reply=await _pin(await ctx.agent_for(session_id), command))
        case "pins":
            agent = await ctx.agent_for(session_id)
            history = await store.ledger.list_instructions(agent.session_id, include_inactive=True)
            return CommandResult(
                reply=ledger_text((await agent.instructions.ledger()).entries, history)
            )
        case "unpin":
            return CommandResult(reply=await _unpin(await ctx.agent_for(session_id), command))
        case "remind" | "jobs" | "heartbeat":
            return CommandResult(
                reply=await _job_command(ctx, command, message, principal, key, session_id)
            )
        case "undo" | "retry":  # /retry with something to retry runs as a turn (the runner)
            taken = await take_back(await ctx.agent_for(session_id), command.name)
            return CommandResult(reply=taken.reply)
        case "bringback":
            agent = await ctx.agent_for(session_id)
            reply = await bring_back(agent, command, store.view(access.reads))
            return CommandResult(reply=reply)
        case "uncompact":
            return CommandResult(reply=await uncompact(await ctx.agent_for(session_id)))
        case "stop" | "busy":  # answered at intake (`gateway.steering`), never queued
            return CommandResult(reply=f"/{command.name} is answered as soon as it arrives.")
        case "memory":
            reply = await memory_text(ctx.memory, ctx.config.memory, message, principal)
            return CommandResult(reply=reply)
        case "forget":
            memory, arg = ctx.memory, command.argument
            reply = await forget_text(memory, ctx.config.memory, message, principal, arg)
            return CommandResult(reply=reply)
        case unreachable:
            assert_never(unreachable)


async def _job_command(
    ctx: CommandContext,
    command: Command,
    message: InboundMessage,
    principal: Principal,
    key: str,
    session_id: str,
) -> str:
    from gateway.job_commands import heartbeat_command, jobs_command, jobs_of, remind_command

    jobs = jobs_of(ctx.store)
    if jobs is None:
        return "Scheduled jobs are not available with this store."
    arg = command.argument
    if command.name == "remind":
        return await remind_command(
            jobs, ctx.config, principal, message, arg, key=key, session_id=session_id
        )
    if command.name == "heartbeat":
        return await heartbeat_command(
            jobs, ctx.config, principal, message, arg, key=key, session_id=session_id
        )
    return await jobs_command(jobs, ctx.config, principal, arg)


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
    change = await agent.instructions.pin(command.argument)
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
    removed = await agent.instructions.unpin(int(raw))
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
    await write_model(ctx.store.meta, session_id, name)
    return (
        f"Switched to {name} ({window:,}-token window). Note: the prompt cache starts cold, so "
        "the next reply re-reads the whole conversation at full price."
    )


async def _chat_sessions(
    sessions: SessionCatalog, message: InboundMessage, key: str, owner: str, *, limit: int = 200
) -> list[SessionInfo]:
    """The chat's sessions of `owner` (filtered in the query), newest first."""
    platform = message.chat.platform
    found = await sessions.list_sessions(limit=limit, platform=platform, owner=owner)
    return [s for s in found if s.chat_key == key]


async def _list_sessions(
    sessions: SessionCatalog, message: InboundMessage, session_id: str, key: str, owner: str
) -> str:
    mine = [
        s
        for s in await _chat_sessions(sessions, message, key, owner)
        if has_conversation(s) or s.id == session_id  # one never used is not worth a line
    ][:SESSIONS_LISTED]
    if not mine:
        return "No sessions yet."
    now = time.time()
    lines = [session_line(s, now=now, current=s.id == session_id) for s in mine]
    return "Sessions of this chat (newest first; /resume ID goes back to one):\n" + "\n".join(lines)


def has_conversation(info: SessionInfo) -> bool:
    """Something was said in it (more than the system prompt a new agent writes)."""
    return info.total_messages > 1


def session_line(info: SessionInfo, *, now: float, current: bool = False) -> str:
    """`→ 20260101_120000_1a2b3c4d  “title”  12 messages · 3 h ago` (one session, one line)."""
    title = f"  “{info.title}”" if info.title else ""
    size = f"{info.total_messages} message{'s' if info.total_messages != 1 else ''}"
    return (
        f"{'→' if current else ' '} {info.id}{title}  {size} · {format_age(now - info.updated_at)}"
    )


def format_age(seconds: float) -> str:
    """`just now`, `5 min ago`, `3 h ago`, `2 d ago`."""
    if seconds < 60:
        return "just now"
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    raise AssertionError("unreachable")


def unknown_command_text(name: str, platform: str) -> str:
    """The local answer to `/name` that is no command: the close matches, and /help."""
    extra = ("exit", "quit") if platform == "terminal" else ()
    matches = close_matches(name, extra=extra)
    hint = f" Did you mean {' or '.join('/' + m for m in matches)}?" if matches else ""
    return f"Unknown command /{name}.{hint} /help lists the commands."


def _refusal_text(reason: str) -> str:
    """A manual /compress that found nothing to do says so plainly; other refusals as given."""
    if reason.startswith("nothing to compact"):
        return NOTHING_TO_COMPACT
    return f"Nothing compacted: {reason}"


async def _resume(
    sessions: SessionCatalog,
    command: Command,
    message: InboundMessage,
    session_id: str,
    key: str,
    principal: Principal,
    owner: str,
) -> CommandResult:
    """`/resume ID`: this chat goes back to one of its owner's sessions (the machine's owner
    at the terminal: to any); another owner's session is answered as an unknown id."""
    wanted = command.argument.strip()
    if not wanted:
        return CommandResult(reply="Use /resume ID with an id from /sessions.")
    anywhere = principal.platform == "terminal"
    target = await _find_session(sessions, message, key, wanted, owner, anywhere=anywhere)
    if target is None:
        return CommandResult(reply=f"No session {wanted!r} in this chat; /sessions lists them.")
    if target.id == session_id:
        return CommandResult(reply=f"Already on session {target.id}.")
    if target.end_reason == "compression":
        return CommandResult(
            reply=f"Session {target.id} was continued in a newer session after a compaction; "
            "resume that one (see /sessions)."
        )
    info = await sessions.resume_for_chat(
        message.chat.platform,
        key,
        target.id,
        leaving=session_id,
        owner=None if anywhere else owner,
    )
    title = f" “{info.title}”" if info.title else ""
    return CommandResult(
        reply=f"Resumed session {info.id}{title} ({info.total_messages} messages, last used "
        f"{format_age(time.time() - target.updated_at)}).",
        effect=Rerouted(session_id=info.id),
    )


async def _find_session(
    sessions: SessionCatalog,
    message: InboundMessage,
    key: str,
    wanted: str,
    owner: str,
    *,
    anywhere: bool,
) -> SessionInfo | None:
    """The session `wanted` names: its id, or the unique one of this chat it starts or ends
    with. Only the chat's own sessions of `owner`, unless `anywhere` (the operator owns them
    all)."""
    exact = await sessions.get_session(wanted)
    if exact is not None and (
        anywhere
        or (exact.platform, exact.chat_key, exact.owner) == (message.chat.platform, key, owner)
    ):
        return exact
    found = [
        s
        for s in await _chat_sessions(sessions, message, key, owner)
        if s.id.startswith(wanted) or s.id.endswith(wanted)
    ]
    return found[0] if len(found) == 1 else None


async def _title(
    sessions: SessionCatalog, command: Command, session_id: str, owner: str | None
) -> str:
    """`/title [TEXT]`: show or set the name of the session, if it is `owner`'s (None: any)."""
    text = command.argument.strip()
    if not text:
        info = await sessions.get_session(session_id)
        mine = info is not None and owner in (None, info.owner)
        current = info.title if info is not None and mine else None
        return (
            f"This session is called “{current}”."
            if current
            else "Use /title TEXT to name this session."
        )
    info = await sessions.set_title(session_id, text, owner=owner)
    return f"Session {info.id} is now called “{info.title}”."
