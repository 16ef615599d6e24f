"""Carry out a parsed chat command for the runner; every command answers with one text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.errors import CompactionRefused, HermesError
from agent.pricing import format_usage_summary
from agent.providers.base import Usage
from agent.session_meta import write_model
from gateway.commands import HELP_TEXT, Command
from gateway.platforms.base import InboundMessage
from gateway.routing import is_admin
from state import SessionInfo

if TYPE_CHECKING:
    from agent.agent import AIAgent
    from agent.config import HermesConfig
    from gateway.run import GatewayRunner

__all__ = ["run_command", "status_text"]


async def run_command(
    runner: GatewayRunner, command: Command, message: InboundMessage, session_id: str, key: str
) -> str:
    store = runner.source.store
    match command.name:
        case "help":
            return HELP_TEXT
        case "new":
            runner.forget_agent(session_id)
            info = await store.start_new_for_chat(
                message.chat.platform,
                key,
                user_id=message.user_id,
                model=runner.config.model.default,
            )
            runner.route(key, info.id)
            return f"Started a new session ({info.id}). The previous one stays searchable."
        case "compress":
            agent = await runner.agent_for(session_id)
            try:
                result = await agent.compress(focus=command.argument or None, reason="manual")
            except CompactionRefused as exc:
                return f"Nothing compacted: {exc.reason}"
            runner.mark_compacted(agent.session_id)
            runner.follow_rotation(key, session_id, agent)
            return (
                f"Compacted: {result.messages_before} → {result.messages_after} messages, "
                f"{result.tokens_before:,} → {result.tokens_after:,} tokens."
            )
        case "status":
            agent = await runner.agent_for(session_id)
            info = await store.get_session(agent.session_id)
            return status_text(agent, info, runner.config)
        case "model":
            return await _switch_model(runner, command, message, session_id)
        case "sessions":
            sessions = await store.list_sessions(limit=200, platform=message.chat.platform)
            mine = [s for s in sessions if s.chat_key == key][:5]
            if not mine:
                return "No sessions yet."
            lines = [f"{'→' if s.id == session_id else ' '} {s.id}  {s.title or ''}" for s in mine]
            return "Sessions of this chat (newest first):\n" + "\n".join(lines)


def status_text(agent: AIAgent, info: SessionInfo | None, config: HermesConfig) -> str:
    """Model, tokens, occupancy, compactions, cache hits and cost of one session."""
    status = agent.engine.status()
    threshold, window = status.threshold_tokens, status.context_length
    tokens = (agent.last_usage.prompt_tokens if agent.last_usage else 0) or (
        info.last_prompt_tokens if info is not None else 0
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


async def _switch_model(
    runner: GatewayRunner, command: Command, message: InboundMessage, session_id: str
) -> str:
    from agent.providers.context_window import context_length_for

    if not is_admin(message, runner.config.gateway):
        return "Only an admin can switch the model."
    name = command.argument.strip()
    agent = await runner.agent_for(session_id)
    if not name:
        return f"Current model: {agent.model}. Use /model NAME to switch."
    window = context_length_for(name, None) or runner.source.context_length
    try:
        agent.switch_model(name, window)
    except HermesError as exc:
        return f"Could not switch: {exc}"
    await write_model(runner.source.store, session_id, name)
    return (
        f"Switched to {name} ({window:,}-token window). Note: the prompt cache starts cold, so "
        "the next reply re-reads the whole conversation at full price."
    )
