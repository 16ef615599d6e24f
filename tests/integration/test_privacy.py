"""One person's conversations are nobody else's (issue 24), through the real runner and a real
Runtime on FakeLLM and SQLite, tested as two people.

A plants a secret in A's session; B then tries every door: the model's tools (`session_search`,
`recall` by query and by A's row anchor, `lcm_grep`: judged on the tool results the fake model
receives), the chat commands (`/sessions`, `/resume`, `/title`), and the HTTP API (A's session
id in `X-Hermes-Session-Id`, A's `previous_response_id`, A's exact history replayed statelessly
under B's key, the same `user` under two keys). A positive control each time: A still finds it.
Contracts: OpenAI API reference, "Error codes" (the envelope) and "Responses"
(`previous_response_not_found`, a 400 naming `previous_response_id`).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.http import SESSION_HEADER
from gateway.platforms.base import ChatRef, InboundMessage, PlatformAdapter
from gateway.platforms.telegram import TelegramAdapter
from gateway.run import GatewayRunner, TurnOutcome
from gateway.scheduler import JobScheduler
from sim.llm_server import FakeLLM, ToolCallSpec, Turn
from tests.fakes.telegram import FakeTelegram
from tests.gateway.harness import MODEL, RecordingSink, make_config, start_runtime
from tests.gateway.platform_drivers import wait_until
from tests.integration.http_api import Served, envelope_of, serve

SECRET = "4417"
"""The part of A's message that must never reach B (the word `zorvex` is what B searches for,
and tools echo the query back)."""
PLANTED = f"remember: my bank PIN is zorvex {SECRET}"
A_ID, B_ID, GROUP = "111", "112", "-100"
ALICE_KEY, BOB_KEY = "sk-alice", "sk-bob"


def tool_results(body: dict[str, Any] | None) -> list[str]:
    """The tool results in an Anthropic Messages request, in order (`tool_result` blocks)."""
    results: list[str] = []
    for message in (body or {}).get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "".join(str(part.get("text", "")) for part in inner)
                results.append(str(inner))
    return results


def call(name: str, **arguments: Any) -> Turn:
    return Turn(tool_calls=[ToolCallSpec(name=name, arguments=json.dumps(arguments))])


# -- chat users -----------------------------------------------------------------------------------


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


@asynccontextmanager
async def chat_runner(
    llm: FakeLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *adapters: PlatformAdapter,
    **sections: Any,
) -> AsyncIterator[GatewayRunner]:
    """Telegram users 111 and 112 allowed, session_search and recall enabled, the lcm engine
    (whose `lcm_grep` the principals are granted with it)."""
    config = make_config(
        llm,
        tmp_path / "state.db",
        tools={"enabled": ["session_search", "recall"]},
        context={"engine": "lcm"},
        gateway={"telegram": {"allowed_users": [A_ID, B_ID]}},
        **sections,
    )
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime, list(adapters))
        try:
            yield runner
        finally:
            await runner.stop()


async def say(
    runner: GatewayRunner, user: str, text: str, *, group: str | None = None
) -> TurnOutcome:
    """`user` writes `text` to the bot: in their direct chat, or in the group `group`."""
    message = InboundMessage(
        chat=ChatRef(platform="telegram", chat_id=group or user),
        user_id=user,
        text=text,
        is_direct=group is None,
    )
    return await runner.submit(message, RecordingSink())


async def test_tools_never_bring_another_users_secret(
    llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B's model searches (`session_search`), recalls (by query, and by the anchor of A's own
    row) and greps (`lcm_grep`): none of the four tool results carries A's secret or A's
    session id. A, in another session of A's, finds it with the very same search."""
    async with chat_runner(llm, tmp_path, monkeypatch) as runner:
        planted = await say(runner, A_ID, PLANTED)
        rows = await runner.store.transcript.show(planted.session_id)
        secret_row = next(m["_id"] for m in rows if SECRET in str(m.get("content")))
        llm.script(
            call("session_search", query="zorvex"),
            call("recall", query="zorvex"),
            call("recall", anchor=f"#{secret_row}"),
            call("lcm_grep", pattern="zorvex|PIN"),
            Turn(text="found nothing"),
        )
        await say(runner, B_ID, "what was that PIN again?")
        results = tool_results(llm.requests[-1].json)
        assert len(results) == 4, results
        for result in results:
            assert SECRET not in result and planted.session_id not in result, result
        assert results[0].startswith("No earlier messages match")
        await say(runner, A_ID, "/new")
        llm.script(call("session_search", query="zorvex"), Turn(text="found it"))
        own = await say(runner, A_ID, "what was my PIN?")
        assert own.session_id != planted.session_id
        [found] = tool_results(llm.requests[-1].json)
        assert SECRET in found and planted.session_id in found


async def test_sessions_resume_and_title_are_the_callers_own(
    llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`/sessions` lists none of A's sessions to B; `/resume` with A's id (or its tail) is
    answered exactly as an unknown id and moves nothing; B's next turn stays in B's session
    and A's session is untouched (not ended, not renamed, no new rows)."""
    async with chat_runner(llm, tmp_path, monkeypatch) as runner:
        theirs = (await say(runner, A_ID, PLANTED)).session_id
        mine = (await say(runner, B_ID, "hello")).session_id
        before = await runner.store.transcript.show(theirs, include_archived=True)
        listed = (await say(runner, B_ID, "/sessions")).reply
        assert mine in listed and theirs not in listed
        unknown = "20990101_000000_deadbeef"
        refused_unknown = (await say(runner, B_ID, f"/resume {unknown}")).reply
        for attempt in (theirs, theirs[-8:]):
            refused = (await say(runner, B_ID, f"/resume {attempt}")).reply
            assert refused == refused_unknown.replace(unknown, attempt)
        assert (await say(runner, B_ID, "/title mine now")).session_id == mine
        after = await say(runner, B_ID, "still me?")
        assert after.session_id == mine
        assert not any(SECRET in str(m) for m in await runner.store.transcript.show(mine))
        info = await runner.store.sessions.get_session(theirs)
        assert info is not None and info.end_reason is None and info.title is None
        assert await runner.store.transcript.show(theirs, include_archived=True) == before
        assert info.owner == f"telegram:{A_ID}"


async def test_a_group_sees_only_the_group(
    llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What A said privately is not found from a group A is in; what was said in the group is
    found by another member there (the group's sessions belong to the group), and not from
    that member's own direct chat."""
    async with chat_runner(llm, tmp_path, monkeypatch) as runner:
        await say(runner, A_ID, PLANTED)
        in_group = await say(runner, A_ID, "our group plan is kestrel 99", group=GROUP)
        info = await runner.store.sessions.get_session(in_group.session_id)
        assert info is not None and info.owner == f"telegram:chat:{GROUP}"
        llm.script(call("session_search", query="zorvex"), Turn(text="nothing"))
        await say(runner, A_ID, "my PIN?", group=GROUP)
        [private] = tool_results(llm.requests[-1].json)
        assert SECRET not in private
        llm.script(call("session_search", query="kestrel"), Turn(text="the plan"))
        await say(runner, B_ID, "the plan?", group=GROUP)
        [shared] = tool_results(llm.requests[-1].json)
        assert "99" in shared and in_group.session_id in shared
        llm.script(call("session_search", query="kestrel"), Turn(text="nothing"))
        await say(runner, B_ID, "the plan?")
        [direct] = tool_results(llm.requests[-1].json)
        assert "99" not in direct


async def test_a_job_made_in_a_group_reads_only_the_group(
    llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reminder A makes in a group (real PTB against the fake Bot API) runs as A in the
    group's session with the group's scope, since its reply is posted there: its
    `session_search` does not find what A said privately, and the reply reaches the group."""
    offset = [0.0]
    async with FakeTelegram() as fake:
        adapter = TelegramAdapter(
            token=fake.token, base_url=fake.base_url, poll_timeout_s=1.0, request_timeout_s=3.0
        )
        async with chat_runner(llm, tmp_path, monkeypatch, adapter) as runner:
            scheduler = JobScheduler(
                runner,
                runner.source.store.jobs,  # type: ignore[attr-defined]
                runner.config,
                clock=lambda: time.time() + offset[0],
            )
            try:
                await runner.start()
                await say(runner, A_ID, PLANTED)
                group, a = int(GROUP), int(A_ID)
                await fake.push_text(group, a, "/remind in 10m check the plan", chat_type="group")
                await wait_until(
                    lambda: any("Reminder #1" in m.text for m in fake.sent if m.chat_id == group),
                    what="the reminder's confirmation in the group",
                )
                llm.script(call("session_search", query="zorvex"), Turn(text="checked"))
                offset[0] = 10 * 60 + 1
                assert await scheduler.tick() == 1
                await scheduler.wait_idle()
                [result] = tool_results(llm.requests[-1].json)
                assert SECRET not in result and result.startswith("No earlier messages match")
                await wait_until(
                    lambda: any(m.text == "checked" for m in fake.sent if m.chat_id == group),
                    what="the run's reply in the group",
                )
            finally:
                await scheduler.stop(timeout_s=5)


# -- HTTP keys ------------------------------------------------------------------------------------


@pytest.fixture
async def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    keys = [
        {"name": "alice", "key": ALICE_KEY, "role": "user"},
        {"name": "bob", "key": BOB_KEY, "role": "user"},
    ]
    async with serve(
        tmp_path,
        monkeypatch,
        tools={"enabled": ["session_search", "recall"]},
        gateway={"http": {"keys": keys, "user_sessions": True}},
    ) as served:
        yield served


async def _post(
    api: Served, key: str, path: str, body: dict[str, Any], session: str | None = None
) -> tuple[int, dict[str, Any], str | None]:
    headers = Served.auth(key) | ({SESSION_HEADER: session} if session else {})
    async with api.http.post(f"{api.base}{path}", json=body, headers=headers) as response:
        return response.status, await response.json(), response.headers.get(SESSION_HEADER)


def _chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": list(messages), **extra}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def test_another_keys_session_id_is_an_unknown_id(api: Served) -> None:
    """Bob sending Alice's `X-Hermes-Session-Id` gets the 404 an unknown id gets, word for word
    (the envelope names the header), the model is never called and Alice's session gains
    nothing; Alice herself continues it."""
    status, _, theirs = await _post(api, ALICE_KEY, "/v1/chat/completions", _chat(_user(PLANTED)))
    assert status == 200 and theirs is not None
    before = await api.runner.store.transcript.show(theirs, include_archived=True)
    calls = len(api.llm.requests)
    unknown = "20990101_000000_deadbeef"
    answers = {}
    for session in (theirs, unknown):
        body = _chat(_user("say it back"))
        status, error, _ = await _post(api, BOB_KEY, "/v1/chat/completions", body, session)
        assert status == 404
        answers[session] = json.dumps(envelope_of(error)).replace(session, "<id>")
    assert answers[theirs] == answers[unknown]
    assert envelope_of(error)["param"] == SESSION_HEADER
    assert len(api.llm.requests) == calls
    assert await api.runner.store.transcript.show(theirs, include_archived=True) == before
    body = _chat(_user("and again?"))
    status, _, again = await _post(api, ALICE_KEY, "/v1/chat/completions", body, theirs)
    assert (status, again) == (200, theirs)


async def test_replaying_another_keys_history_starts_your_own_session(api: Served) -> None:
    """Bob resending Alice's exact conversation (stateless mode) starts Bob's own session: the
    model gets only what Bob sent, Alice's session is untouched, and Alice's own replay still
    continues hers (the positive control)."""
    status, first, theirs = await _post(
        api, ALICE_KEY, "/v1/chat/completions", _chat(_user(PLANTED))
    )
    assert status == 200 and theirs is not None
    reply = first["choices"][0]["message"]
    await api.runner.store.transcript.append(
        theirs, [{"role": "user", "content": "later: zorvex 9931"}]
    )
    before = await api.runner.store.transcript.show(theirs, include_archived=True)
    history = [_user(PLANTED), {"role": "assistant", "content": reply["content"]}]
    status, _, bobs = await _post(
        api, BOB_KEY, "/v1/chat/completions", _chat(*history, _user("and?"))
    )
    assert status == 200 and bobs not in (None, theirs)
    assert "9931" not in json.dumps(api.llm.requests[-1].json)
    assert await api.runner.store.transcript.show(theirs, include_archived=True) == before
    info = await api.runner.store.sessions.get_session(bobs or "")
    assert info is not None and info.owner == "http:bob"


async def test_search_over_http_stays_within_the_key(api: Served) -> None:
    """Bob's model calling `session_search` finds none of Alice's sessions; Alice's finds hers."""
    await _post(api, ALICE_KEY, "/v1/chat/completions", _chat(_user(PLANTED)))
    for key, found in ((BOB_KEY, False), (ALICE_KEY, True)):
        api.llm.script(call("session_search", query="zorvex"), Turn(text="done"))
        status, _, _ = await _post(api, key, "/v1/chat/completions", _chat(_user("my PIN?")))
        assert status == 200
        [result] = tool_results(api.llm.requests[-1].json)
        assert (SECRET in result) is found, result


async def test_another_keys_previous_response_id_is_an_unknown_id(api: Served) -> None:
    """Bob continuing Alice's response gets OpenAI's `previous_response_not_found` 400, word for
    word what an unknown id gets, and nothing runs; Alice continues it."""
    status, created, _ = await _post(api, ALICE_KEY, "/v1/responses", {"input": PLANTED})
    assert status == 200
    theirs = created["id"]
    calls = len(api.llm.requests)
    answers = {}
    for response_id in (theirs, "resp_0000"):
        body = {"input": "say it back", "previous_response_id": response_id}
        status, error, _ = await _post(api, BOB_KEY, "/v1/responses", body)
        assert status == 400
        assert envelope_of(error)["code"] == "previous_response_not_found"
        answers[response_id] = json.dumps(error).replace(response_id, "<id>")
    assert answers[theirs] == answers["resp_0000"]
    assert len(api.llm.requests) == calls
    body = {"input": "and again?", "previous_response_id": theirs}
    assert (await _post(api, ALICE_KEY, "/v1/responses", body))[0] == 200


async def test_the_same_user_field_under_two_keys_is_two_sessions(api: Served) -> None:
    """With `user_sessions`, `user` names a session per key: Bob's `user: "family"` is not
    Alice's, so Bob's model never gets Alice's words."""
    body = _chat(_user(PLANTED), user="family")
    status, _, theirs = await _post(api, ALICE_KEY, "/v1/chat/completions", body)
    assert status == 200
    status, _, bobs = await _post(
        api, BOB_KEY, "/v1/chat/completions", _chat(_user("hi"), user="family")
    )
    assert status == 200 and bobs != theirs
    assert SECRET not in json.dumps(api.llm.requests[-1].json)


@pytest.mark.parametrize("widened", [False, True])
async def test_admins_read_everyone_only_when_config_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, widened: bool
) -> None:
    """An admin key's `session_search` reaches Alice's session only with
    `privacy.admins_read_all: true`; a user key never does, whatever the setting."""
    keys = [
        {"name": "alice", "key": ALICE_KEY, "role": "user"},
        {"name": "bob", "key": BOB_KEY, "role": "user"},
        {"name": "ops", "key": "sk-ops", "role": "admin"},
    ]
    async with serve(
        tmp_path,
        monkeypatch,
        tools={"enabled": ["session_search"]},
        gateway={"http": {"keys": keys}},
        privacy={"admins_read_all": widened},
    ) as api:
        await _post(api, ALICE_KEY, "/v1/chat/completions", _chat(_user(PLANTED)))
        for key, finds in (("sk-ops", widened), (BOB_KEY, False)):
            api.llm.script(call("session_search", query="zorvex"), Turn(text="done"))
            await _post(api, key, "/v1/chat/completions", _chat(_user("any PIN?")))
            [result] = tool_results(api.llm.requests[-1].json)
            assert (SECRET in result) is finds, (key, result)
