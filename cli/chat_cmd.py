"""`hermes chat -q TEXT`: one turn from the shell, streamed to stdout or printed as JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path

from agent.access import ApprovalAnswer, ApprovalRequest, Approver, TurnAccess
from agent.config import HermesConfig
from agent.errors import HermesError, ProviderError
from agent.tools.approval import render_request
from cli.runtime import Runtime

__all__ = ["run_chat_once"]


async def run_chat_once(
    args: argparse.Namespace, config: HermesConfig, home: Path, environ: dict[str, str]
) -> int:
    """Run one turn; print the reply (streamed) or one JSON object with --json."""
    streamed = not args.json

    async def on_text(delta: str) -> None:
        sys.stdout.write(delta)
        sys.stdout.flush()

    try:
        async with await Runtime.start(config, home, environ, model_override=args.model) as runtime:
            for notice in runtime.notices:
                print(notice, file=sys.stderr)
            session_id = await _session_for(runtime, args.resume)
            async with runtime.lock_session(session_id):  # a gateway may serve it too
                agent = await runtime.open_agent(session_id)
                result = await agent.run_turn(
                    args.query,
                    on_text=on_text if streamed else None,
                    access=_access(config, environ),
                )
            if streamed:
                sys.stdout.write("\n" if result.reply and not result.reply.endswith("\n") else "")
                sys.stdout.flush()
            else:
                print(json.dumps(_as_json(result, agent.model), ensure_ascii=False))
            await agent.finalize_turn()  # the reply is out; end-of-turn work may take its time
            await agent.wait_background()
            async with runtime.lock_session(session_id):
                await agent.adopt_ready()  # what it proposed is kept before the process ends
    except ProviderError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1
    except HermesError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 2
    return 0


async def _session_for(runtime: Runtime, resume: str | None) -> str:
    if resume:
        info = await runtime.store.get_session(resume)
        if info is None:
            raise HermesError(f"no session {resume!r}; `hermes sessions list` shows the ids")
        return str(info.id)
    info = await runtime.store.create_session(platform="cli", model=runtime.settings.model)
    return str(info.id)


def _as_json(result: object, model: str) -> dict[str, object]:
    data = asdict(result)  # type: ignore[call-overload]
    usage = data.pop("usage")
    usage["prompt_tokens"] = (
        usage["input_tokens"] + usage["cache_write_tokens"] + usage["cache_read_tokens"]
    )
    return {
        "reply": data.pop("reply"),
        "session_id": data.pop("session_id"),
        "model": model,
        "usage": usage,
        **data,
    }


def _access(config: HermesConfig, environ: dict[str, str]) -> TurnAccess:
    """The operator at this terminal; approvals are asked on it when stdin is a TTY."""
    from gateway.access import resolve_principal
    from gateway.platforms.base import ChatRef, InboundMessage

    approver = _tty_approver()
    message = InboundMessage(
        chat=ChatRef(platform="terminal", chat_id="local"),
        user_id=environ.get("USER") or "local",
        text="",
        is_direct=True,
    )
    principal = resolve_principal(message, config, has_approval_channel=approver is not None)
    assert principal is not None  # the terminal always has its operator
    return TurnAccess(principal=principal, approver=approver)


def _tty_approver() -> Approver | None:
    """Ask on the terminal when there is one; nobody can approve otherwise."""
    if not sys.stdin.isatty():
        return None

    async def approve(request: ApprovalRequest) -> ApprovalAnswer:
        from gateway.platforms.terminal import APPROVAL_PROMPT, parse_terminal_answer

        prompt = f"\n{render_request(request)}\n{APPROVAL_PROMPT}"
        answer = await asyncio.to_thread(input, prompt)
        return parse_terminal_answer(answer)

    return approve
