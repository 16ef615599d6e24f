"""A long stateless chat on a small window: every request the model gets tells the truth.

Issue 33: a 24-turn stateless chat on a 6,000-token window with default compression sent 7 of
24 model requests carrying `[no reply was stored for the message above]` after messages that
had been answered: micro-compaction folded the answers and the provider edge "repaired" the
user messages left side by side. Here the real openai SDK resends the whole conversation each
turn (OpenAI API reference, "Create chat completion": `messages` is the conversation so far),
the runtime serves it on a custom (OpenAI-compatible, uncached) route, and every request the
fake model receives is checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from agent.compaction.markers import FOLDED_MARK, UNANSWERED_MARK
from gateway.http import HttpApiServer
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import is_summary_request, make_config, start_runtime

KEY = "sk-hermes-test"
TURNS = 24
WINDOW = 6_000
ANSWER = "Here is what I found. " + "detail " * 55  # about 100 tokens
MICRO_MARK = "rolling summary"


def _is_compaction_call(body: dict[str, Any]) -> bool:
    first = json.dumps((body.get("messages") or [{}])[:1])
    return is_summary_request(body) or MICRO_MARK in first


def _respond(body: dict[str, Any], api: str) -> Turn | None:
    if is_summary_request(body):
        return Turn(text="## Goal\nKeep chatting.\n## Next Steps\nAnswer the newest question.")
    if _is_compaction_call(body):
        return Turn(text="- The user asked numbered questions; each got a long detailed answer.")
    return Turn(text=ANSWER)


def _texts(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


async def test_a_24_turn_stateless_chat_on_a_6000_window_has_no_false_no_reply_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Default compression (micro on), 6,000-token window, 24 answered turns resent whole by
    the client: no model request carries the "no reply" mark, every user message in it is
    followed by an answer, a summary, or the folded-answer note; and compaction did run."""
    async with FakeLLM(responder=_respond) as llm:
        config = make_config(
            llm,
            tmp_path / "state.db",
            model={
                "provider": "custom",
                "default": "local-model",
                "base_url": llm.openai_base_url,
                "context_length": WINDOW,
            },
            compression={"micro_compact": True},
        )
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            server = HttpApiServer(runner, host="127.0.0.1", port=0, api_key=KEY)
            await server.start()
            client = openai.AsyncOpenAI(
                api_key=KEY,
                base_url=f"http://127.0.0.1:{server.port}/v1",
                max_retries=0,
                timeout=30.0,
            )
            conversation: list[dict[str, Any]] = [{"role": "system", "content": "Be useful."}]
            try:
                for n in range(TURNS):
                    conversation.append({"role": "user", "content": f"question {n}: go on"})
                    reply = await client.chat.completions.create(
                        model="local-model",
                        messages=conversation,  # type: ignore[arg-type]
                    )
                    conversation.append(
                        {"role": "assistant", "content": reply.choices[0].message.content}
                    )
            finally:
                await client.close()
                await server.stop()
                await runner.stop()
    bodies = [r.json for r in llm.requests if r.json and "messages" in r.json]
    chats = [b for b in bodies if not _is_compaction_call(b)]
    compactions = len(bodies) - len(chats)
    folds = sum(1 for b in bodies if MICRO_MARK in json.dumps(b["messages"][:1]))
    assert len(chats) == TURNS
    false_marks = folded = 0
    for body in chats:
        messages = body["messages"]
        for message, after in zip(messages, messages[1:], strict=False):
            if message.get("role") != "user":
                continue
            text = _texts(after)
            false_marks += UNANSWERED_MARK in text
            folded += text == FOLDED_MARK
            assert after.get("role") == "assistant" or "CONTEXT COMPACTION" in text, text[:80]
    assert false_marks == 0
    # the property was exercised, not dodged: answers were folded, and what the model was
    # told about them is the truth
    assert folds >= 1 and folded >= 1
    print(f"chat={len(chats)} compaction calls={compactions} folds={folds} folded notes={folded}")
