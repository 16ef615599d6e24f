"""Stateless clients end to end: the real openai SDK (sync and async, streamed and not) resends
the whole conversation with every request, as Open WebUI does; the runner, the store and
FakeLLM are real.

Contract: OpenAI API reference, "Create chat completion": `messages` is "a list of messages
comprising the conversation so far"; the client keeps the history and sends it every time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from agent.messages import is_summary_marker
from gateway.http import SESSION_HEADER, HttpApiServer
from gateway.http.conversations import CLIENT_SYSTEM_HEADING
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import (
    is_summary_request,
    make_config,
    request_texts,
    start_runtime,
    summary_responder,
)
from tests.waits import SLOW_WAIT_S

KEY = "sk-hermes-test"
Message = dict[str, Any]


@dataclass(slots=True)
class Api:
    client: openai.AsyncOpenAI
    sync: openai.OpenAI
    llm: FakeLLM
    runner: GatewayRunner
    runtime: Any

    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of the model's chat turns (summary calls left out)."""
        return [r.json for r in self.llm.requests if r.json and not is_summary_request(r.json)]

    async def http_sessions(self) -> int:
        return len(await self.runtime.store.sessions.list_sessions(limit=1000, platform="http"))


@asynccontextmanager
async def serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **sections: Any
) -> AsyncIterator[Api]:
    async with FakeLLM(responder=summary_responder()) as llm:
        config = make_config(llm, tmp_path / "state.db", **sections)
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            server = HttpApiServer(runner, host="127.0.0.1", port=0, api_key=KEY)
            await server.start()
            base_url = f"http://127.0.0.1:{server.port}/v1"
            client = openai.AsyncOpenAI(
                api_key=KEY, base_url=base_url, max_retries=0, timeout=SLOW_WAIT_S
            )
            sync = openai.OpenAI(api_key=KEY, base_url=base_url, max_retries=0, timeout=SLOW_WAIT_S)
            try:
                yield Api(client=client, sync=sync, llm=llm, runner=runner, runtime=runtime)
            finally:
                await client.close()
                sync.close()
                await server.stop()
                await runner.stop()


@pytest.fixture
async def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    async with serving(tmp_path, monkeypatch) as served:
        yield served


async def _send(
    api: Api, messages: list[Message], *, stream: bool = False, sync: bool = False
) -> tuple[str, str]:
    """One request as a stateless client makes it; returns (reply, session id header)."""
    if sync:
        raw = await asyncio.to_thread(
            api.sync.chat.completions.with_raw_response.create,
            model="test-model",
            messages=messages,
            stream=stream,  # type: ignore[arg-type]
        )
    else:
        raw = await api.client.chat.completions.with_raw_response.create(
            model="test-model",
            messages=messages,
            stream=stream,  # type: ignore[arg-type]
        )
    if not stream:
        return raw.parse().choices[0].message.content or "", raw.headers[SESSION_HEADER]
    parsed = raw.parse()
    if sync:
        pieces = await asyncio.to_thread(
            lambda: [c.choices[0].delta.content or "" for c in parsed if c.choices]
        )
    else:
        pieces = [c.choices[0].delta.content or "" async for c in parsed if c.choices]
    return "".join(pieces), raw.headers[SESSION_HEADER]


def _conversation(turns: int) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": "You are a terse pirate."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i}"})
        messages.append({"role": "assistant", "content": f"answer {i}"})
    return messages


async def test_the_model_receives_the_clients_system_and_history(api: Api) -> None:
    """A first request with a system message and earlier turns: the model gets our system
    prompt with the client's under its heading, then the client's history, then the question."""
    messages = [*_conversation(2), {"role": "user", "content": "and now?"}]
    reply, session_id = await _send(api, messages)
    body = api.chat_requests()[-1]
    system = request_texts({"system": body.get("system")})
    assert any(CLIENT_SYSTEM_HEADING in s and "You are a terse pirate." in s for s in system)
    assert request_texts({"messages": body["messages"]}) == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
        "and now?",
    ]
    assert reply == "echo: and now?" and session_id


@pytest.mark.parametrize(
    ("stream", "sync"), [(False, False), (True, False), (False, True), (True, True)]
)
async def test_fifty_stateless_requests_keep_one_session(
    api: Api, stream: bool, sync: bool
) -> None:
    """A client resending its growing conversation 50 times (sync or async SDK, streamed or
    not): one stored session, and each model call gets the stored history once plus the new
    question (as the client's history would have given it)."""
    messages: list[Message] = [{"role": "system", "content": "Be brief."}]
    sessions = set()
    count = 50 if not sync else 12  # the sync client runs in a thread: fewer, same contract
    for i in range(count):
        messages.append({"role": "user", "content": f"q{i}"})
        reply, session_id = await _send(api, messages, stream=stream, sync=sync)
        messages.append({"role": "assistant", "content": reply})
        sessions.add(session_id)
        texts = request_texts({"messages": api.chat_requests()[-1]["messages"]})
        assert texts == [t for m in messages[1:] for t in [m["content"]]][:-1]
    assert len(sessions) == 1
    assert await api.http_sessions() == 1


async def test_text_parts_names_and_trimmed_replies_still_match(api: Api) -> None:
    """The client sends our reply back as text parts, with a `name`, trimmed: same session."""
    messages: list[Message] = [{"role": "user", "content": "hello"}]
    reply, first = await _send(api, messages)
    messages.append(
        {"role": "assistant", "content": [{"type": "text", "text": f" {reply} "}], "name": "bot"}
    )
    messages.append({"role": "user", "content": [{"type": "text", "text": "more"}], "name": "me"})
    _, second = await _send(api, messages)
    assert first == second and await api.http_sessions() == 1


async def test_edit_or_regenerate_starts_a_branch_with_the_right_context(api: Api) -> None:
    """Editing an earlier message or regenerating the last answer matches no stored head: a
    new session with exactly what the client sent, never the stored conversation's context."""
    messages: list[Message] = [{"role": "user", "content": "first"}]
    for word in ("second", "third"):
        reply, session_id = await _send(api, messages)
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": word}]
    _, original = await _send(api, messages)

    edited = [dict(m) for m in messages]
    edited[0]["content"] = "first, edited"
    _, branch = await _send(api, edited)
    assert branch != original
    texts = request_texts({"messages": api.chat_requests()[-1]["messages"]})
    assert texts[0] == "first, edited" and "first" not in texts

    regenerate = messages  # the same request again: the client dropped the answer it got
    _, again = await _send(api, regenerate)
    assert again not in (original, branch)
    assert request_texts({"messages": api.chat_requests()[-1]["messages"]}) == [
        m["content"] for m in messages
    ]
    assert await api.http_sessions() == 3


async def test_two_requests_extending_one_head_at_once_never_share_a_context(api: Api) -> None:
    """Both extend the same stored conversation concurrently: one continues it, the other
    starts a branch; each model call sees only its own new message."""
    messages: list[Message] = [{"role": "user", "content": "base"}]
    reply, base = await _send(api, messages)
    messages.append({"role": "assistant", "content": reply})
    api.llm.script(Turn(text="slow", delay_s=0.3), Turn(text="fast"))
    results = await asyncio.gather(
        _send(api, [*messages, {"role": "user", "content": "left"}]),
        _send(api, [*messages, {"role": "user", "content": "right"}]),
    )
    sessions = {session for _, session in results}
    assert len(sessions) == 2 and base in sessions
    for body in api.chat_requests()[1:]:
        texts = request_texts({"messages": body["messages"]})
        assert texts[:2] == ["base", "echo: base"] and len(texts) == 3
        assert texts[-1] in ("left", "right")


async def test_session_header_and_user_sessions_keep_session_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `gateway.http.user_sessions`, the body's `user` names one session; only the newest
    user message is the turn, whatever history the client sends."""
    async with serving(tmp_path, monkeypatch, gateway={"http": {"user_sessions": True}}) as api:
        ids = set()
        for text in ("one", "two"):
            raw = await api.client.chat.completions.with_raw_response.create(
                model="test-model",
                user="alice",
                messages=[
                    {"role": "user", "content": "ignored"},
                    {"role": "assistant", "content": "x"},
                    {"role": "user", "content": text},
                ],
            )
            ids.add(raw.headers[SESSION_HEADER])
        assert len(ids) == 1
        assert request_texts({"messages": api.chat_requests()[-1]["messages"]}) == [
            "one",
            "echo: one",
            "two",
        ]


async def test_a_long_stateless_conversation_gets_the_compacted_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the threshold, the session is compacted and the model receives the compacted
    active set (a summary marker, fewer messages) plus the new question, not the whole
    history the client resent; the conversation stays one session."""
    window = 8_000
    async with serving(tmp_path, monkeypatch, model={"context_length": window}) as api:
        messages: list[Message] = []
        for i in range(30):
            messages.append({"role": "user", "content": f"q{i} " + "words " * 150})
            reply, session_id = await _send(api, messages)
            messages.append({"role": "assistant", "content": reply})
        body = api.chat_requests()[-1]
        sent = body["messages"]
        assert len(sent) < len(messages) - 1
        assert any("summar" in " ".join(request_texts({"messages": [m]})).lower() for m in sent)
        assert request_texts({"messages": sent})[-1].startswith("q29 ")
        assert await api.http_sessions() == 1
        active = await api.runtime.store.transcript.load_active(session_id)
        assert any(is_summary_marker(m) for m in active)


async def test_a_session_mode_turn_on_a_stateless_session_ends_its_prefix_matching(
    api: Api,
) -> None:
    """The stateless client's history no longer describes the session once a request named it
    by header: its next stateless request starts a new session instead of missing that turn."""
    messages: list[Message] = [{"role": "user", "content": "one"}]
    reply, session_id = await _send(api, messages)
    raw = await api.client.chat.completions.with_raw_response.create(
        model="test-model",
        messages=[{"role": "user", "content": "aside"}],
        extra_headers={SESSION_HEADER: session_id},
    )
    assert raw.headers[SESSION_HEADER] == session_id
    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "two"}]
    _, after = await _send(api, messages)
    assert after != session_id
    assert "aside" not in request_texts({"messages": api.chat_requests()[-1]["messages"]})


async def test_every_new_message_of_a_request_is_the_turn(api: Api) -> None:
    """Two user messages after our reply (a client that queued a second one): both are the
    turn, in order, as one user message (no provider takes two in a row), and the
    conversation still continues on its session."""
    messages: list[Message] = [{"role": "user", "content": "start"}]
    reply, session_id = await _send(api, messages)
    messages += [
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "first part"},
        {"role": "user", "content": "second part"},
    ]
    _, same = await _send(api, messages)
    assert same == session_id
    texts = request_texts({"messages": api.chat_requests()[-1]["messages"]})
    assert texts[-1] == "first part\n\nsecond part"
    assert texts[-2] == "echo: start"
    stored = await api.runtime.store.transcript.load_active(session_id)
    users = [m.get("content") for m in stored if m.get("role") == "user"]
    assert users == ["start", "first part\n\nsecond part"]


async def test_a_first_request_bigger_than_the_window_is_compacted_before_the_model_sees_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that arrives with a history past the window (it talked to another server
    before): the imported session is compacted before the turn, so the model gets a summary
    and the recent tail, within the window, and the answer still comes."""
    window = 8_000
    async with serving(tmp_path, monkeypatch, model={"context_length": window}) as api:
        messages: list[Message] = []
        for i in range(30):
            messages.append({"role": "user", "content": f"q{i} " + "words " * 150})
            messages.append({"role": "assistant", "content": f"a{i} " + "more " * 150})
        messages.append({"role": "user", "content": "the newest question"})
        reply, _ = await _send(api, messages)
        sent = api.chat_requests()[-1]
        assert reply == "echo: the newest question"
        assert len(sent["messages"]) < len(messages)
        assert api.llm._anthropic.prompt_tokens(sent) < window
        assert request_texts({"messages": sent["messages"]})[-1] == "the newest question"


async def test_a_message_refused_at_the_door_keeps_the_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An over-long new message is refused before anything is stored; the client's next
    request (the same history, a shorter message) still continues the stored conversation."""
    async with serving(tmp_path, monkeypatch, gateway={"max_message_chars": 1_000}) as api:
        messages: list[Message] = [{"role": "user", "content": "hello"}]
        reply, session_id = await _send(api, messages)
        messages.append({"role": "assistant", "content": reply})
        calls = len(api.chat_requests())
        try:
            await _send(api, [*messages, {"role": "user", "content": "x" * 5_000}])
        except openai.APIStatusError as exc:  # the status is the HTTP surface's to choose
            assert exc.status_code == 413
        assert len(api.chat_requests()) == calls
        _, again = await _send(api, [*messages, {"role": "user", "content": "short"}])
        assert again == session_id
        assert await api.http_sessions() == 1


async def test_client_tools_round_trip_statelessly(api: Api) -> None:
    """A stateless client with its own tool: the call comes back, the client resends the
    conversation with the call and its result, and the same session continues the turn; the
    model gets the result after the stored call, once (OpenAI API reference, "Create chat
    completion": `tool_calls`, then `role: tool` messages with `tool_call_id`)."""
    from sim.llm_server import ToolCallSpec

    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    api.llm.script(Turn(tool_calls=[ToolCallSpec("get_weather", '{"city": "Paris"}')]))
    messages: list[Message] = [{"role": "user", "content": "weather in Paris?"}]
    raw = await api.client.chat.completions.with_raw_response.create(
        model="test-model",
        messages=messages,
        tools=[weather],  # type: ignore[arg-type, list-item]
    )
    first = raw.parse().choices[0].message
    assert first.tool_calls
    call = first.tool_calls[0]
    messages.append(first.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"})
    api.llm.script(Turn(text="It is sunny."))
    raw2 = await api.client.chat.completions.with_raw_response.create(
        model="test-model",
        messages=messages,
        tools=[weather],  # type: ignore[arg-type, list-item]
    )
    assert raw2.parse().choices[0].message.content == "It is sunny."
    assert raw2.headers[SESSION_HEADER] == raw.headers[SESSION_HEADER]
    assert await api.http_sessions() == 1
    sent = json.dumps(api.chat_requests()[-1]["messages"])
    assert sent.count("sunny, 21 C") == 1 and sent.count("weather in Paris?") == 1
