"""`recall` brings archived rows back verbatim: by anchor, by query, bounded and paged."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.archive.anchors import split_index
from agent.archive.recall import PAGE_HITS, PAGE_ROWS, recall_tool
from agent.compaction.markers import find_newest_marker
from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.messages import ToolCall, assistant_message, tool_message, user_message
from agent.tools.registry import ToolContext, ToolRegistry
from state import SqlSessionStore
from tests.agent.scripted import agent_on_store, tool_call
from tests.fakes.provider import FakeProvider


def _call(**args: object) -> ToolCall:
    return {
        "id": "r1",
        "type": "function",
        "function": {"name": "recall", "arguments": json.dumps(args)},
    }


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlSessionStore]:
    s = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    yield s
    await s.aclose()


async def _recall(
    store: SqlSessionStore, session_id: str, *, chars: int = 20_000, **args: object
) -> str:
    ctx = ToolContext(session_id=session_id, services={"store": store}, max_output_chars=chars)
    return await ToolRegistry([recall_tool()]).run(_call(**args), ctx)


async def _session_of_turns(store: SqlSessionStore, turns: int) -> tuple[str, list[list[int]]]:
    """`turns` exchanges (user, tool call, long test output, answer), all archived."""
    info = await store.sessions.create_session()
    ids: list[list[int]] = []
    for n in range(turns):
        c: ToolCall = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "run_tests", "arguments": json.dumps({"target": f"t{n}.py"})},
        }
        output = "\n".join(f"t{n}.py::test_{i} PASSED" for i in range(1000))
        msgs = [
            user_message(f"Run ticket QX-{n} please"),
            assistant_message("Running.", [c]),
            tool_message(
                c["id"], "run_tests", f"{output}\n{390 + n} passed, {n} failed in 1.0{n}s"
            ),
            assistant_message(f"Done with QX-{n}."),
        ]
        await store.transcript.append(info.id, msgs)
        ids.append([m["_id"] for m in msgs])
    await store.transcript.archive_and_compact(info.id, [user_message("latest")])
    return info.id, ids


async def test_recall_by_anchor_returns_the_rows_verbatim(store: SqlSessionStore) -> None:
    """An anchor range gives its rows oldest first, marked archived, tool calls shown."""
    session_id, ids = await _session_of_turns(store, 2)
    text = await _recall(store, session_id, anchor=f"[#{ids[0][0]}–#{ids[0][-1]}]")
    assert f"#{ids[0][0]} user (archived" in text and "Run ticket QX-0 please" in text
    assert '→ run_tests({"target": "t0.py"})' in text
    assert "390 passed, 0 failed in 1.00s" in text  # a long output keeps its end
    assert "characters omitted" in text and "QX-1" not in text
    assert "(end of range)" in text


async def test_recall_pages_through_a_wide_anchor(store: SqlSessionStore) -> None:
    """A range wider than a page says how to continue; the next page starts where it stopped."""
    session_id, ids = await _session_of_turns(store, 5)
    anchor = f"#{ids[0][0]}-{ids[-1][-1]}"
    first = await _recall(store, session_id, anchor=anchor)
    assert f'More: recall("anchor": "[#{ids[0][0]}–#{ids[-1][-1]}]", "page": 2)' in first
    second = await _recall(store, session_id, anchor=anchor, page=2)
    flat = [i for turn in ids for i in turn]
    shown = [int(i) for i in re.findall(r"^#(\d+) ", first + "\n" + second, re.M)]
    assert shown == flat[: 2 * PAGE_ROWS] and len(first) <= 16_500


async def test_recall_by_query_returns_matches_with_their_exchange(store: SqlSessionStore) -> None:
    """A query finds the row through search and `context` adds the rows that followed it."""
    session_id, ids = await _session_of_turns(store, 3)
    text = await _recall(store, session_id, query="QX-1 ticket", context=3)
    assert text.startswith("recall 'QX-1 ticket', page 1: 1 match(es)")
    for row_id in ids[1]:
        assert f"#{row_id} " in text
    assert "391 passed, 1 failed in 1.01s" in text and f"#{ids[2][0]} " not in text


async def test_recall_by_query_pages(store: SqlSessionStore) -> None:
    """More matches than a page: the note names the next page, which holds the rest."""
    session_id, _ = await _session_of_turns(store, PAGE_HITS + 2)
    first = await _recall(store, session_id, query="ticket")
    assert first.count("— match ") == PAGE_HITS and '"page": 2' in first
    second = await _recall(store, session_id, query="ticket", page=2)
    assert second.count("— match ") == 2 and "More:" not in second


async def test_recall_stays_in_its_session_and_within_budget(store: SqlSessionStore) -> None:
    """Rows of other sessions never show; the output respects tools.max_output_chars."""
    session_id, ids = await _session_of_turns(store, 3)
    other, _ = await _session_of_turns(store, 1)
    assert (await _recall(store, other, anchor=f"#{ids[0][0]}")).startswith("No rows")
    small = await _recall(store, session_id, anchor=f"#{ids[0][0]}-{ids[-1][-1]}", chars=3_000)
    assert len(small) <= 4_500


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "needs an 'anchor'"),
        ({"anchor": "HRM-12"}, "is not an anchor"),
        ({"query": "   "}, "needs an 'anchor'"),
        ({"query": "nothing-like-this"}, "No messages of this conversation match"),
    ],
)
async def test_recall_explains_bad_requests(
    store: SqlSessionStore, args: dict[str, object], message: str
) -> None:
    """Missing or malformed arguments come back to the model as a clear message."""
    session_id, _ = await _session_of_turns(store, 1)
    assert message in await _recall(store, session_id, **args)


async def test_recall_without_a_store_is_an_error() -> None:
    """A run without a session store says so instead of failing."""
    text = await ToolRegistry([recall_tool()]).run(_call(query="x"), ToolContext(session_id="s"))
    assert text == "Error: recall is unavailable: no session store in this run"


async def test_recall_through_the_loop_after_a_compaction(tmp_path: Path) -> None:
    """The model reads the summary's anchor and recalls the compacted request word for word."""
    summarizer = FakeProvider(responder=lambda request: "## Goal\nA summary without anchors.")
    config = CompressionConfig(protect_last_n=2)

    def engine() -> ContextCompressor:
        return ContextCompressor(config, summarizer=summarizer, summary_model="aux")

    provider = FakeProvider()
    agent, store = await agent_on_store(
        tmp_path, provider, engine, tools=ToolRegistry([recall_tool()])
    )
    try:
        for n in range(6):
            provider.script(f"answer {n} " + "x" * 40_000)
            await agent.run_turn(f"request {n}: remember the code word KESTREL-{n}")
        await agent.compress(reason="manual")
        found = find_newest_marker(agent.transcript)
        assert found is not None
        _, index = split_index(found[1])
        assert index, "the summary cites the rows it stands for"
        assert "KESTREL-1" not in str([m.get("content") for m in agent.transcript])
        provider.script(tool_call("recall", anchor=str(index[0])), "It was KESTREL-1.")
        await agent.run_turn("what was the second code word?")
        result = next(
            m for m in provider.requests[-1].messages if m.get("tool_call_id") == "call_1"
        )
        assert "request 1: remember the code word KESTREL-1" in str(result["content"])
        assert "(archived" in str(result["content"])
    finally:
        await store.aclose()
