"""`hermes memory add | list | show | forget | export` through `run_agent.main` on a real store,
as the terminal's person (`terminal:local`), with another person's memory beside it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import run_agent
from state import MemoryEntry, SqlSessionStore, default_url


async def _other_persons_note(home: Path) -> int:
    store = await SqlSessionStore.open(default_url(home))
    try:
        entry = await store.memory.add_memory(
            "telegram:111", "Telegram person's secret hobby: falconry", kind="note", origin="tool"
        )
        return entry.id
    finally:
        await store.aclose()


async def _get(home: Path, entry_id: int) -> MemoryEntry | None:
    store = await SqlSessionStore.open(default_url(home))
    try:
        return await store.memory.get_memory("telegram:111", entry_id)
    finally:
        await store.aclose()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run_agent.main(["memory", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_memory_cli_round_trip_sees_only_the_terminal_person(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """add, list (text and --json), show, forget and export act on terminal:local only; a
    secret is redacted before it is stored; bad numbers exit 1 with one sentence."""
    other = asyncio.run(_other_persons_note(hermes_home))
    capsys.readouterr()  # the set-up's own log lines
    code, out, _ = _run(capsys, "add", "Prefers answers in Portuguese", "--profile")
    assert code == 0 and out.startswith("Remembered ")
    code, out, _ = _run(capsys, "add", "token is sk-ant-api03-" + "x" * 40)
    assert code == 0 and "[REDACTED]" in out and "xxxx" not in out
    code, out, _ = _run(capsys, "list", "--json")
    entries = json.loads(out)
    assert [e["kind"] for e in entries] == ["profile", "note"]
    assert all("falconry" not in e["text"] for e in entries)
    code, out, _ = _run(capsys, "list")
    assert "Prefers answers in Portuguese" in out and "falconry" not in out
    code, out, err = _run(capsys, "show", str(other))
    assert code == 1 and "nothing is remembered" in err and "falconry" not in out + err
    code, out, err = _run(capsys, "forget", str(other))
    assert code == 1 and "falconry" not in out + err
    first = entries[0]["id"]
    code, out, _ = _run(capsys, "forget", str(first))
    assert code == 0 and out.startswith(f"Forgot {first}: Prefers answers")
    code, out, _ = _run(capsys, "export")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(r["id"], r["deleted"], r["text"]) for r in lines][0] == (first, True, "")
    code, _, err = _run(capsys, "show", "twelve")
    assert code == 1 and "not an entry number" in err
    kept = asyncio.run(_get(hermes_home, other))
    assert kept is not None and kept.text.endswith("falconry") and not kept.deleted
