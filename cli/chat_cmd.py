"""`hermes chat -q TEXT`: the terminal platform in one-shot mode, streamed or as JSON.

One message goes through the same `GatewayRunner` as every platform: session hygiene, chat
commands (`-q /status`), the session's lock across processes and `finalize_turn` behave the
same; on the way out the runner settles background work and keeps what it proposed. `-q -`
reads the message from stdin. Plain output streams the reply to stdout and ends with the
session id on stderr; `--json` prints one object (`reply`, `session_id`, `model`, `usage`…).
On a terminal, control characters in the reply are shown, not obeyed (`inert_text`): a reply
cannot write the clipboard (OSC 52) or retitle the window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, assert_never

from agent.access import ApprovalAnswer, ApprovalRequest, Approver
from agent.config import HermesConfig
from agent.events import (
    AgentEvent,
    CompactionBegan,
    CompactionCommitted,
    EngineSwitched,
    ModelSwitched,
    NativeCompaction,
    SessionReloaded,
    ToolFinished,
    ToolStarted,
)
from agent.providers.base import Usage
from agent.tools.approval import render_request
from cli.chat_sessions import starting_session
from cli.error_boundary import UsageError
from cli.runtime import Runtime
from gateway.intake import check_length
from gateway.platforms.base import ChatRef, InboundMessage
from gateway.platforms.terminal_text import compaction_line_of, inert_text, resume_hint
from gateway.run import GatewayRunner, TurnOutcome

__all__ = ["read_query", "run_chat_once"]


def read_query(query: str, stdin: Any = None) -> str:
    """The message: `-` reads all of stdin; an empty message is an error."""
    text = (stdin or sys.stdin).read().rstrip("\r\n") if query == "-" else query
    if not text.strip():
        raise UsageError("the message is empty; give the text after -q, or pipe it in with -q -")
    return text


async def run_chat_once(
    args: argparse.Namespace, config: HermesConfig, home: Path, environ: dict[str, str]
) -> int:
    """One message through the runner. A failure ends at the command line's boundary
    (`cli.error_boundary`): one sentence, exit 1 (2 for a config mistake)."""

    def on_event(event: AgentEvent) -> None:
        match event:
            case CompactionCommitted():
                if event.kind == "batch":  # a micro pass is adopted quietly
                    print(compaction_line_of(event), file=sys.stderr)
            case (
                NativeCompaction()
                | CompactionBegan()
                | SessionReloaded()
                | ModelSwitched()
                | EngineSwitched()
                | ToolStarted()
                | ToolFinished()
            ):
                return
            case unreachable:
                assert_never(unreachable)

    text = read_query(args.query)
    async with await Runtime.start(
        config, home, environ, model_override=args.model, on_event=on_event
    ) as runtime:
        for notice in runtime.notices:
            print(notice, file=sys.stderr)
        runner = GatewayRunner(runtime)
        try:
            return await _one_message(args, runner, runtime, text, environ)
        finally:
            await runner.stop()  # settles background work and keeps what it proposed


async def _one_message(
    args: argparse.Namespace,
    runner: GatewayRunner,
    runtime: Runtime,
    text: str,
    environ: dict[str, str],
) -> int:
    session_id = await starting_session(
        runtime.store, resume=args.resume, newest=args.continue_, interactive=False
    )
    message = InboundMessage(
        chat=ChatRef(platform="terminal", chat_id="local"),
        user_id=environ.get("USER") or "local",
        text=text,
        is_direct=True,
    )
    if session_id is None:
        check_length(  # refused before a session exists for it
            text,
            max_chars=runtime.config.gateway.max_message_chars,
            context_length=runtime.context_length,
        )
        session_id = await runner.new_session(message)
    sink = _StdoutSink(stream=not args.json, inert=_is_terminal(sys.stdout))
    outcome = await runner.submit(message, sink, session_id=session_id, approver=_tty_approver())
    if outcome.error is not None:  # the boundary says it in one sentence, exit 1
        print(resume_hint(session_id), file=sys.stderr)  # what was stored stays resumable
        raise outcome.error
    if outcome.kind == "failed":
        print(resume_hint(session_id), file=sys.stderr)
        print(f"hermes: {outcome.reply.removeprefix('⚠️ ')}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(_as_json(outcome, runtime.settings.model), ensure_ascii=False))
    else:
        sink.end(outcome.reply)
        print(resume_hint(outcome.session_id), file=sys.stderr)
    return 0


class _StdoutSink:
    """The one-shot reply: streamed words to stdout as they come; notices to stderr."""

    def __init__(self, *, stream: bool, inert: bool) -> None:
        self.streams = stream
        self._streamed = ""
        self._shown = inert_text if inert else str

    async def start(self, session_id: str) -> None:
        return None

    async def on_text(self, delta: str) -> None:
        self._streamed += delta
        sys.stdout.write(self._shown(delta))
        sys.stdout.flush()

    async def notice(self, text: str) -> None:
        print(inert_text(text) if _is_terminal(sys.stderr) else text, file=sys.stderr)

    async def finish(self, text: str) -> None:
        return None  # printed by `end` once the outcome says it was not a failure

    def end(self, reply: str) -> None:
        """Finish the plain output: the reply if it was not streamed, then a newline."""
        shown = self._streamed or reply
        if not self._streamed and reply:
            sys.stdout.write(self._shown(reply))
        if not shown.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()


def _is_terminal(stream: Any) -> bool:
    """Whether `stream` is a terminal (a stand-in without `isatty` is not)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty()) if callable(isatty) else False


def _as_json(outcome: TurnOutcome, model: str) -> dict[str, object]:
    """The `--json` object: as before the one-shot chat joined the runner."""
    turn = outcome.turn
    data: dict[str, Any] = (
        asdict(turn)
        if turn is not None
        else {
            "reply": outcome.reply,
            "session_id": outcome.session_id,
            "usage": asdict(Usage()),
            "model_calls": 0,
            "compacted": False,
            "truncated": False,
        }
    )
    usage = data.pop("usage")
    usage["prompt_tokens"] = (
        usage["input_tokens"] + usage["cache_write_tokens"] + usage["cache_read_tokens"]
    )
    data["compacted"] = bool(data.get("compacted")) or outcome.compacted
    return {
        "reply": data.pop("reply"),
        "session_id": outcome.session_id,
        "model": model,
        "usage": usage,
        **{k: v for k, v in data.items() if k != "session_id"},
    }


def _tty_approver() -> Approver | None:
    """Ask on the terminal when there is one; nobody can approve otherwise."""
    if not sys.stdin.isatty():
        return None

    async def approve(request: ApprovalRequest) -> ApprovalAnswer:
        from gateway.platforms.terminal import APPROVAL_PROMPT, parse_terminal_answer

        prompt = f"\n{inert_text(render_request(request))}\n{APPROVAL_PROMPT}"
        answer = await asyncio.to_thread(input, prompt)
        return parse_terminal_answer(answer)

    return approve
