"""`hermes sessions ...`: text and JSON output over a real SQLite store."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import structlog.testing

from agent.errors import StoreError
from agent.messages import assistant_message, user_message
from agent.providers.base import Usage
from cli.sessions_cmd import add_sessions_parser, parse_when, run_sessions_cli, run_sessions_command
from state import SqlSessionStore, default_url


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hermes")
    add_sessions_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["sessions", *argv])


@pytest_asyncio.fixture
async def seeded(hermes_home: Path) -> AsyncIterator[tuple[SqlSessionStore, str]]:
    store = await SqlSessionStore.open(default_url(hermes_home))
    info = await store.sessions.create_session(platform="telegram", title="Trip plans")
    call = {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": '{"p":"x"}'}}
    msgs = [
        user_message("book a train to Lyon"),
        assistant_message(None, [call]),
        assistant_message("Booked the Lyon train."),
    ]
    await store.transcript.append(info.id, msgs)
    await store.transcript.archive_and_compact(
        info.id, [{"role": "user", "content": "[summary] booked", "_kind": "summary"}, msgs[-1]]
    )
    await store.meta.record_usage(info.id, Usage(input_tokens=1200, output_tokens=80))
    yield store, info.id
    await store.aclose()


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        ("1970-01-02", 86_400.0),
        ("1970-01-01T01:00:00", 3_600.0),
        ("1970-01-01T01:00:00+01:00", 0.0),
    ],
)
def test_parse_when(text: str, epoch: float) -> None:
    """Dates are UTC unless they name a zone."""
    assert parse_when(text) == epoch


def test_parse_when_rejects_junk() -> None:
    """A bad date is an argparse error, so the user sees usage help."""
    with pytest.raises(argparse.ArgumentTypeError):
        parse_when("yesterday")


async def test_list_text_and_json(seeded: tuple[SqlSessionStore, str]) -> None:
    """list shows id, platform, counts and title; --json gives the full records."""
    store, sid = seeded
    text = await run_sessions_command(store, _parse("list"))
    assert sid in text and "telegram" in text and "2/4" in text and "Trip plans" in text
    data = json.loads(await run_sessions_command(store, _parse("list", "--json")))
    assert data[0]["id"] == sid and data[0]["input_tokens"] == 1200


async def test_the_shell_sees_every_owner_and_can_pick_one(
    seeded: tuple[SqlSessionStore, str],
) -> None:
    """`hermes sessions` is the machine owner's full view: every owner's sessions and hits;
    `--owner` narrows list and search to one (docs/privacy.md)."""
    store, sid = seeded
    other = await store.sessions.create_session(platform="http", owner="http:alice")
    await store.transcript.append(
        other.id, [{"role": "user", "content": "alice books a train too"}]
    )
    everyone = await run_sessions_command(store, _parse("list"))
    assert sid in everyone and other.id in everyone
    hers = json.loads(
        await run_sessions_command(store, _parse("list", "--owner", "http:alice", "--json"))
    )
    assert [(r["id"], r["owner"]) for r in hers] == [(other.id, "http:alice")]
    found = json.loads(await run_sessions_command(store, _parse("search", "train", "--json")))
    assert {h["session_id"] for h in found} == {sid, other.id}
    narrowed = await run_sessions_command(store, _parse("search", "train", "--owner", "http:alice"))
    assert other.id in narrowed and sid not in narrowed


async def test_show_active_and_all(seeded: tuple[SqlSessionStore, str]) -> None:
    """show prints the active transcript; --all adds archived rows, marked."""
    store, sid = seeded
    active = await run_sessions_command(store, _parse("show", sid))
    assert "[summary]" in active and "book a train" not in active
    everything = await run_sessions_command(store, _parse("show", sid, "--all"))
    assert everything.count("[archived: compaction]") == 2 and "-> grep(" in everything
    records = json.loads(await run_sessions_command(store, _parse("show", sid, "--all", "--json")))
    assert [r["active"] for r in records] == [False, False, True, True]


async def test_search_text_and_json(seeded: tuple[SqlSessionStore, str]) -> None:
    """search prints cited hits with archived ones marked; filters and --json work."""
    store, sid = seeded
    text = await run_sessions_command(store, _parse("search", "Lyon"))
    assert text.count(sid) == 2 and "[archived]" in text and "[Lyon]" in text
    hits = json.loads(
        await run_sessions_command(store, _parse("search", "Lyon", "--role", "assistant", "--json"))
    )
    assert [h["role"] for h in hits] == ["assistant"]
    none = await run_sessions_command(store, _parse("search", "Lyon", "--since", "2999-01-01"))
    assert none.startswith("No messages match")
    assert (await run_sessions_command(store, _parse("search", "'; DROP TABLE"))).startswith("No")


async def test_export_formats(seeded: tuple[SqlSessionStore, str]) -> None:
    """export writes JSON Lines or Markdown of every row."""
    store, sid = seeded
    lines = (await run_sessions_command(store, _parse("export", sid))).splitlines()
    assert len(lines) == 5 and json.loads(lines[0])["type"] == "session"
    md = await run_sessions_command(store, _parse("export", sid, "--format", "md"))
    assert md.startswith(f"# Session {sid}") and "(archived: compaction)" in md


async def test_stats_text_and_json(seeded: tuple[SqlSessionStore, str]) -> None:
    """stats summarizes counts and tokens."""
    store, _ = seeded
    text = await run_sessions_command(store, _parse("stats"))
    assert "4 (2 active, 2 archived, 1 summaries)" in text and "in 1,200" in text
    data = json.loads(await run_sessions_command(store, _parse("stats", "--json")))
    assert data["messages"] == 4 and data["dialect"] == "sqlite"


async def test_unknown_session_is_an_error(seeded: tuple[SqlSessionStore, str]) -> None:
    """Showing a session that does not exist raises StoreError (the CLI exits 1)."""
    store, _ = seeded
    with pytest.raises(StoreError, match="no session"):
        await run_sessions_command(store, _parse("show", "nope"))


async def test_run_sessions_cli_prints_and_exits(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The entry point prints the output with exit 0, or the error on stderr with exit 1."""
    url = default_url(hermes_home)
    with structlog.testing.capture_logs() as logs:
        assert await run_sessions_cli(_parse("list"), url) == 0
        assert capsys.readouterr().out == "No sessions.\n"
        assert await run_sessions_cli(_parse("export", "nope"), url) == 1
    assert "store_opened" in [e["event"] for e in logs]
    assert "no session 'nope'" in capsys.readouterr().err


async def test_show_starts_with_cache_ratio_and_cost(hermes_home: Path) -> None:
    """`sessions show` displays the session's tokens, cache hit ratio and estimated cost."""
    from agent.config import HermesConfig

    store = await SqlSessionStore.open(default_url(hermes_home))
    try:
        info = await store.sessions.create_session(platform="cli", model="claude-sonnet-4-6")
        await store.transcript.append(info.id, [user_message("hi")])
        await store.meta.record_usage(
            info.id, Usage(input_tokens=100, cache_read_tokens=900, output_tokens=50)
        )
        out = await run_sessions_command(
            store, _parse("show", info.id), prices=HermesConfig().pricing
        )
    finally:
        await store.aclose()
    assert "Cache hit ratio: 90.0%" in out
    # 100 x $3 + 900 x $0.30 + 50 x $15 per million tokens
    assert "Estimated cost: $0.0013" in out
