"""`hermes memory add | list | show | forget | export`: what Hermes remembers about the terminal's
person (`terminal:local`, the machine's operator), from the shell.

`add_memory_parser` adds the sub-command; `run_memory_cli` opens the store and prints; the
`memory_*` functions take a view bound to the owner and return text, so they are tested
without a terminal. Nothing here can reach another person's memory.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from agent.access import Principal
from agent.config import MemoryConfig
from agent.errors import StoreError
from agent.memory.tool import parse_entry_id
from agent.memory.view import MemoryRefused, OwnerMemory
from gateway.memory_commands import render_listing
from state import MemoryEntry, SqlSessionStore

__all__ = [
    "TERMINAL_OWNER",
    "add_memory_parser",
    "memory_add",
    "memory_export",
    "memory_forget",
    "memory_list",
    "memory_show",
    "run_memory_cli",
    "run_memory_command",
]

TERMINAL_OWNER = Principal.operator((), can_approve=False).owner
"""`terminal:local`: the person at this machine's terminal and `hermes chat`."""


def add_memory_parser(sub: Any) -> None:
    """Add `memory` and its actions to the `hermes` sub-parsers."""
    memory = sub.add_parser(
        "memory",
        help="what Hermes remembers about you: add, list, show, forget, export",
        description="Your memory (the terminal's person, terminal:local): a short profile "
        "shown at the start of every conversation, and notes offered when they are relevant. "
        "See docs/memory.md.",
    )
    actions = memory.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="remember TEXT (a note, or --profile)")
    add.add_argument("text", help="what to remember, one short fact")
    add.add_argument("--profile", action="store_true", help="a profile entry (always shown)")
    lst = actions.add_parser("list", help="everything remembered, numbered")
    lst.add_argument("--json", action="store_true", help="one JSON array instead of text")
    show = actions.add_parser("show", help="one entry with where it came from")
    show.add_argument("n", help="the number `list` shows")
    forget = actions.add_parser("forget", help="erase entry N (gone from search and context)")
    forget.add_argument("n", help="the number `list` shows")
    actions.add_parser(
        "export", help="everything, corrected and forgotten entries included, as JSON lines"
    )


async def run_memory_cli(args: argparse.Namespace, url: str, config: MemoryConfig) -> int:
    """Open the store at `url` and run the action; exit 1 with one sentence on a refusal."""
    try:
        async with await SqlSessionStore.open(url) as store:
            view = OwnerMemory(
                store.memory, TERMINAL_OWNER, profile_max_tokens=config.profile_max_tokens
            )
            out = await run_memory_command(view, args)
    except (StoreError, MemoryRefused, LookupError) as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return 0


async def run_memory_command(view: OwnerMemory, args: argparse.Namespace) -> str:
    match args.memory_command:
        case "add":
            return await memory_add(view, args.text, profile=args.profile)
        case "list":
            return await memory_list(view, as_json=args.json)
        case "show":
            return await memory_show(view, args.n)
        case "forget":
            return await memory_forget(view, args.n)
        case "export":
            return await memory_export(view)
        case other:
            raise LookupError(f"unknown memory action {other!r}")


async def memory_add(view: OwnerMemory, text: str, *, profile: bool = False) -> str:
    entry = await view.remember(text, kind="profile" if profile else "note", origin="user")
    return f"Remembered {entry.id}: {entry.text}"


async def memory_list(view: OwnerMemory, *, as_json: bool = False) -> str:
    entries = await view.entries()
    if as_json:
        return json.dumps([_record(e) for e in entries], ensure_ascii=False, indent=2)
    return render_listing(entries, limit=0).replace("/forget N", "hermes memory forget N")


async def memory_show(view: OwnerMemory, raw: str) -> str:
    entry = await view.get(_number(raw))
    if entry is None:
        raise LookupError(f"nothing is remembered as {raw}; `hermes memory list` shows what is")
    lines = [f"{entry.id}. {entry.text}", f"kind: {entry.kind}, origin: {entry.origin}"]
    if entry.source_session_id:
        anchor = ""
        if entry.first_row_id is not None:
            anchor = f" rows [#{entry.first_row_id}–#{entry.last_row_id}]"
        lines.append(f"learned in session {entry.source_session_id}{anchor}")
    if entry.superseded_by is not None:
        lines.append(f"corrected by {entry.superseded_by}")
    if entry.deleted:
        lines.append("forgotten (its text was erased)")
    return "\n".join(lines)


async def memory_forget(view: OwnerMemory, raw: str) -> str:
    gone = await view.forget(_number(raw))
    if gone is None:
        raise LookupError(f"nothing is remembered as {raw}; `hermes memory list` shows what is")
    return f"Forgot {gone.id}: {gone.text}"


async def memory_export(view: OwnerMemory) -> str:
    entries = await view.entries(include_history=True)
    return "\n".join(json.dumps(_record(e), ensure_ascii=False) for e in entries)


def _number(raw: str) -> int:
    number = parse_entry_id(raw)
    if number is None:
        raise LookupError(f"{raw!r} is not an entry number; `hermes memory list` shows them")
    return number


def _record(entry: MemoryEntry) -> dict[str, Any]:
    record = asdict(entry)
    record.pop("owner")  # always this person's; no need to print the key
    return record
