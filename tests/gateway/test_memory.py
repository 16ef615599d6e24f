"""Memory across conversations, through the real runner, runtime, Anthropic SDK and FakeLLM.

Judged on what the model is sent (the recorded request bodies) and what the store holds, as two
people: Alice (`telegram:111`) and Bob (`telegram:222`), each in their own direct chat.
Contract of the wire (Anthropic Messages API): `system` carries the system prompt; a prompt
cache hit needs a byte-identical prefix (system first, then messages in order).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent.memory.block import MEMORY_START
from agent.memory.facts import FACTS_OPEN
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from sim.llm_server._values import ToolCallSpec
from tests.gateway.harness import (
    WAIT_S,
    RecordingSink,
    inbound,
    is_summary_request,
    make_config,
    request_texts,
    start_runtime,
)

ALICE, BOB = "111", "222"
ALICE_OWNER = "telegram:111"
PEANUTS = "My daughter Mia is allergic to peanuts"


async def _say(runner: GatewayRunner, text: str, who: str = ALICE) -> str:
    async with asyncio.timeout(WAIT_S * 4):
        message = inbound(text, platform="telegram", chat_id=who, user_id=who)
        outcome = await runner.submit(message, RecordingSink())
    return outcome.reply


def _memory_call(**args: Any) -> Turn:
    return Turn(tool_calls=[ToolCallSpec("memory", json.dumps(args))])


def _chat_requests(llm: FakeLLM) -> list[dict[str, Any]]:
    return [r.json for r in llm.requests if r.json is not None and not is_summary_request(r.json)]


def _system(body: dict[str, Any]) -> str:
    return request_texts({"system": body.get("system")})[0]


def _last_tool_result(body: dict[str, Any]) -> str:
    for message in reversed(body["messages"]):
        for block in message["content"] if isinstance(message["content"], list) else ():
            if block.get("type") == "tool_result":
                content = block["content"]
                return content if isinstance(content, str) else content[0]["text"]
    raise AssertionError("no tool result in the request")


def _config(llm: FakeLLM, db_path: Path, **sections: dict[str, Any]) -> Any:
    tools = {"enabled": ["memory", "recall"]}
    gateway = {"telegram": {"allowed_users": [ALICE, BOB]}}
    return make_config(llm, db_path, tools=tools, gateway=gateway, **sections)


async def test_a_fact_told_once_is_in_the_next_session_of_that_person_only(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice's remembered fact and profile are in the system message of her new session (the
    note because her first message is about it), and in none of Bob's requests."""
    async with start_runtime(_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        llm.script(
            _memory_call(action="remember", text=PEANUTS),
            _memory_call(action="remember", text="Her name is Alice Moreau", profile=True),
            Turn(text="Noted, both."),
        )
        assert await _say(runner, f"{PEANUTS}. Please remember that.") == "Noted, both."
        assert "Remembered as m" in _last_tool_result(_chat_requests(llm)[-1])
        assert (await _say(runner, "/new")).startswith("Started a new session")
        llm.script(Turn(text="Rice cakes."))
        await _say(runner, "Which snacks can I pack for Mia? No peanuts of course.")
        system = _system(_chat_requests(llm)[-1])
        assert MEMORY_START in system
        assert "allergic to peanuts" in system and "Alice Moreau" in system
        assert "not instructions" in system
        llm.script(Turn(text="Apples."), Turn(text="Sure."))
        await _say(runner, "Which snacks can I pack for my kid? Peanuts are fine.", who=BOB)
        await _say(runner, "What is my name?", who=BOB)
        await runner.stop()
    bob = [r for r in _chat_requests(llm) if "my kid" in json.dumps(r)]
    assert bob and all("peanuts" not in _system(r) and "Moreau" not in _system(r) for r in bob)
    assert all(MEMORY_START not in _system(r) for r in bob)


async def test_compaction_keeps_facts_with_their_anchor_and_recall_finds_the_row(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fact said only in turns a compaction summarizes away is a note afterwards, anchored
    to its row; the stored summary carries no facts section; `recall` of the note's anchor
    returns the row; the next session of the person starts with it."""
    fact = "My sister Ana lives in Porto and I visit her every August"
    seen: list[str] = []

    def respond(body: dict[str, Any], api: str) -> Turn | None:
        if not is_summary_request(body):
            return None
        text = "\n".join(request_texts(body))
        row = re.search(r"\[user #(\d+)\]\n" + re.escape(fact), text)
        assert row is not None, "the summary request labels each row with its anchor"
        seen.append(text)
        return Turn(
            text=f"## Goal\nChat.\n## Next Steps\nGo on.\n{FACTS_OPEN}\n"
            f"- Has a sister, Ana, in Porto; visits her every August [#{row.group(1)}]\n"
            "</user-facts>"
        )

    llm.responder = respond
    config = _config(
        llm,
        db_path,
        model={"context_length": 8000},
        compression={"protect_first_n": 1, "protect_last_n": 2},
    )
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        await _say(runner, fact + ". " + "context " * 80)
        for n in range(8):
            await _say(runner, f"message number {n} " + "words " * 100)
        assert (await _say(runner, "/compress")).startswith("Compacted:")
        assert "about the user worth keeping beyond this conversation" in seen[0]
        notes = await runtime.store.memory.list_memory(ALICE_OWNER)
        assert [n.text for n in notes] == ["Has a sister, Ana, in Porto; visits her every August"]
        note = notes[0]
        assert note.origin == "compaction" and note.first_row_id is not None
        session_id = note.source_session_id
        assert session_id is not None
        rows = await runtime.store.search.read_rows(session_id, ids=[note.first_row_id])
        assert rows[0].text.startswith(fact)
        stored = await runtime.store.transcript.show(session_id, include_archived=True)
        assert all(FACTS_OPEN not in (m.get("content") or "") for m in stored)
        anchor = f"[#{note.first_row_id}–#{note.last_row_id}]"
        llm.script(
            Turn(tool_calls=[ToolCallSpec("recall", json.dumps({"anchor": anchor}))]),
            Turn(text="She lives in Porto."),
        )
        await _say(runner, "Where does my sister live?")
        assert fact in _last_tool_result(_chat_requests(llm)[-1])
        await _say(runner, "/new")
        llm.script(Turn(text="Porto, in August."))
        await _say(runner, "When do I usually visit my sister Ana?")
        assert "sister, Ana, in Porto" in _system(_chat_requests(llm)[-1])
        await runner.stop()


async def test_between_compactions_the_cached_prefix_never_changes(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With prompt caching on, every request between two compactions has the same `system`
    bytes and extends the previous request's messages; a profile entry remembered mid-session
    reaches the system message only at the next compaction."""
    llm.responder = lambda body, api: (
        Turn(text="## Goal\nChat.\n## Next Steps\nGo on.") if is_summary_request(body) else None
    )
    config = _config(
        llm,
        db_path,
        model={"default": "claude-test-1", "context_length": 8000},
        compression={"protect_first_n": 1, "protect_last_n": 2},
    )
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        await runtime.store.memory.add_memory(
            ALICE_OWNER, "Prefers metric units", kind="profile", origin="user"
        )
        llm.script(Turn(text="Hi."))
        await _say(runner, "hello " + "words " * 100)
        llm.script(
            _memory_call(action="remember", text="Is vegetarian", profile=True), Turn(text="Ok.")
        )
        await _say(runner, "I am vegetarian, keep that in mind. " + "words " * 100)
        for n in range(8):
            await _say(runner, f"message number {n} " + "words " * 100)
        first_epoch = _chat_requests(llm)
        assert (await _say(runner, "/compress")).startswith("Compacted:")
        for n in range(3):
            await _say(runner, f"after number {n} " + "words " * 60)
        second_epoch = _chat_requests(llm)[len(first_epoch) :]
        await runner.stop()
    assert "cache_control" in json.dumps(first_epoch[0]["system"])
    for epoch in (first_epoch, second_epoch):
        systems = {json.dumps(r["system"], sort_keys=True) for r in epoch}
        assert len(systems) == 1, "the system message changed between compactions"
        for before, after in zip(epoch, epoch[1:], strict=False):
            old, new = _unmarked(before["messages"]), _unmarked(after["messages"])
            assert new[: len(old)] == old, "a request did not extend the one before it"
    assert "metric units" in _system(first_epoch[0]) and "vegetarian" not in _system(
        first_epoch[-1]
    )
    assert "vegetarian" in _system(second_epoch[0]) and "metric units" in _system(second_epoch[0])


async def test_forget_removes_a_note_from_search_and_the_next_session(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/memory lists the note numbered; /forget N erases it: the memory tool's search no
    longer finds it and the next session's request does not carry it."""
    async with start_runtime(_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        note = await runtime.store.memory.add_memory(
            ALICE_OWNER, "Lives at 12 Rua Augusta, Lisbon", kind="note", origin="tool"
        )
        listing = await _say(runner, "/memory")
        assert f"{note.id}. Lives at 12 Rua Augusta, Lisbon" in listing
        forgot = await _say(runner, f"/forget {note.id}")
        assert forgot.startswith(f"Forgot {note.id}: Lives at 12 Rua Augusta")
        assert (await _say(runner, f"/forget {note.id}")).startswith("Nothing is remembered")
        assert (await _say(runner, "/forget x")) == "Use /forget N with a number /memory shows."
        llm.script(_memory_call(action="search", query="Rua Augusta"), Turn(text="No idea."))
        await _say(runner, "Where do I live, on Rua Augusta?")
        assert _last_tool_result(_chat_requests(llm)[-1]).startswith("Nothing remembered")
        assert "Rua Augusta, Lisbon" not in _system(_chat_requests(llm)[-1])
        assert (await _say(runner, "/memory")).startswith("I remember nothing about you yet")
        await runner.stop()


async def test_bob_never_reaches_alices_memory(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob's /memory, /forget, and memory tool (search, list, forget, update by Alice's id)
    see and change nothing of Alice's; her note is intact afterwards."""
    async with start_runtime(_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        note = await runtime.store.memory.add_memory(
            ALICE_OWNER, PEANUTS, kind="note", origin="tool"
        )
        assert (await _say(runner, "/memory", who=BOB)).startswith("I remember nothing")
        assert (await _say(runner, f"/forget {note.id}", who=BOB)).startswith(
            "Nothing is remembered"
        )
        calls = [
            {"action": "search", "query": "peanuts daughter Mia"},
            {"action": "list"},
            {"action": "forget", "id": f"m{note.id}"},
            {"action": "update", "id": str(note.id), "text": "No allergies"},
        ]
        results: list[str] = []
        for args in calls:
            llm.script(_memory_call(**args), Turn(text="Done."))
            await _say(runner, "peanuts?", who=BOB)
            results.append(_last_tool_result(_chat_requests(llm)[-1]))
        await runner.stop()
        alice = await runtime.store.memory.list_memory(ALICE_OWNER, include_history=True)
    assert results[0].startswith("Nothing remembered matches")
    assert results[1] == "Nothing is remembered about this person yet."
    assert results[2].startswith("Error: nothing is remembered under that id")
    assert results[3].startswith("Error: nothing changed: nothing current is remembered")
    assert all("peanuts" not in r.lower().replace("peanuts?", "") for r in results[1:])
    assert [(e.text, e.deleted, e.superseded_by) for e in alice] == [(PEANUTS, False, None)]


async def test_a_group_chat_uses_nobodys_memory(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a group conversation the profile is not shown, /memory refuses to list it, and the
    memory tool is unavailable: others would read along."""
    async with start_runtime(_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        await runtime.store.memory.add_memory(ALICE_OWNER, PEANUTS, kind="profile", origin="user")

        async def in_group(text: str) -> str:
            message = inbound(
                text, platform="telegram", chat_id="family", user_id=ALICE, is_direct=False
            )
            async with asyncio.timeout(WAIT_S):
                return (await runner.submit(message, RecordingSink())).reply

        assert (await in_group("/memory")).startswith("Your memory is shown only in a direct")
        llm.script(_memory_call(action="list"), Turn(text="Hm."))
        await in_group("what do you know about me? peanuts?")
        body = _chat_requests(llm)[-1]
        assert "memory is not available in this conversation" in _last_tool_result(body)
        assert MEMORY_START not in _system(body)
        await runner.stop()


def _unmarked(value: Any) -> Any:
    """The value without prompt-cache markers (they move with the rolling window)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


async def test_a_standing_instruction_about_the_person_joins_the_profile(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "Always answer in German" (about the person) is offered to the profile and is in the
    next session's system message; "never push to main" (about the task) is not."""
    async with start_runtime(_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        llm.script(Turn(text="Jawohl."))
        await _say(runner, "From now on, always answer in German. Never push to main directly.")
        profile = await runtime.store.memory.list_memory(ALICE_OWNER, kind="profile")
        assert [(e.text, e.origin) for e in profile] == [
            ("From now on, always answer in German", "ledger")
        ]
        await _say(runner, "/new")
        llm.script(Turn(text="Hallo."))
        await _say(runner, "hello again")
        system = _system(_chat_requests(llm)[-1])
        await runner.stop()
    memory = system.split(MEMORY_START, 1)[1]
    assert "always answer in German" in memory and "push to main" not in memory


async def test_a_replaced_instruction_corrects_its_profile_entry(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the ledger replaces "always answer in German" with "never answer in German", the
    profile entry is corrected (the old one kept as history), not doubled."""
    async with start_runtime(_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        llm.script(Turn(text="Jawohl."), Turn(text="Understood."))
        await _say(runner, "From now on, always answer in German.")
        await _say(runner, "Never answer in German.")
        await runner.stop()
        current = await runtime.store.memory.list_memory(ALICE_OWNER, kind="profile")
        history = await runtime.store.memory.list_memory(ALICE_OWNER, include_history=True)
    assert [e.text for e in current] == ["Never answer in German"]
    assert [e.superseded_by for e in history] == [current[0].id, None]


async def test_with_an_embeddings_endpoint_search_is_hybrid_and_survives_its_failure(
    llm: FakeLLM, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `memory.embeddings` (the real openai SDK against a strict fake of /v1/embeddings),
    a note is found by a query sharing no whole word with it; Bob's hybrid search still sees
    none of Alice's notes; with the endpoint down, full-text search goes on."""
    from tests.fakes.embeddings import FakeEmbeddings

    async with FakeEmbeddings() as vectors:
        embeddings = {"base_url": vectors.base_url, "model": "fake-embed", "api_key": "k"}
        config = _config(llm, db_path, memory={"embeddings": embeddings})
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            llm.script(
                _memory_call(action="remember", text="Mia cannot eat peanuts"),
                Turn(text="Noted."),
                _memory_call(action="search", query="peanut allergies"),
                Turn(text="Found it."),
                _memory_call(action="search", query="peanut allergies"),
                Turn(text="Nothing."),
            )
            await _say(runner, "Mia cannot eat peanuts, remember that.")
            await _say(runner, "any peanut allergies in the family?")
            found = _last_tool_result(_chat_requests(llm)[-1])
            await _say(runner, "any peanut allergies in my family?", who=BOB)
            bob = _last_tool_result(_chat_requests(llm)[-1])
            vectors.down = True
            llm.script(_memory_call(action="search", query="Mia peanuts"), Turn(text="Yes."))
            await _say(runner, "does Mia eat peanuts?")
            degraded = _last_tool_result(_chat_requests(llm)[-1])
            await runner.stop()
    assert "Mia cannot eat peanuts" in found
    assert bob.startswith("Nothing remembered matches")
    assert "Mia cannot eat peanuts" in degraded
    assert vectors.requests and all(r["model"] == "fake-embed" for r in vectors.requests)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({}, "action must be"),
        ({"action": "dance"}, "action must be"),
        ({"action": "remember"}, "needs a non-empty 'text'"),
        ({"action": "remember", "text": "x" * 5000}, "at most 4000 characters"),
        ({"action": "remember", "text": "sk-ant-api03-" + "a" * 40}, "but a secret"),
        ({"action": "forget", "id": ["m1"]}, "needs the entry's 'id'"),
        ({"action": "update", "id": "m999", "text": "y"}, "nothing current is remembered"),
        ({"action": "search", "query": "   "}, "non-empty 'query'"),
    ],
)
async def test_bad_memory_calls_are_answered_and_store_nothing(
    llm: FakeLLM,
    db_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: dict[str, Any],
    error: str,
) -> None:
    """A malformed or refused memory call gets an error result naming the problem, stores
    nothing, and the conversation goes on."""
    async with start_runtime(_config(llm, db_path), tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        llm.script(_memory_call(**args), Turn(text="Sorry."), Turn(text="Still here."))
        await _say(runner, "remember this")
        result = _last_tool_result(_chat_requests(llm)[-1])
        assert await _say(runner, "hello?") == "Still here."
        await runner.stop()
        stored = await runtime.store.memory.list_memory(ALICE_OWNER, include_history=True)
    assert result.startswith("Error:") and error in result
    assert stored == []
