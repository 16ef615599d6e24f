"""`hermes sessions list | show | search | export | stats | backup`: read the session store, print
text or JSON, or copy it while it runs.

`add_sessions_parser` adds the sub-command to the `hermes` parser; `run_sessions_cli` opens the
store and prints; the `sessions_*` functions take a store and options and return the text, so they
are tested without a terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from agent.config import PriceEntry
from agent.errors import StoreError
from agent.messages import ChatMessage, content_text
from state import (
    ExportFormat,
    SessionCatalog,
    SessionInfo,
    SessionSearch,
    SqlSessionStore,
    Transcript,
)
from state.export import message_record

__all__ = [
    "add_sessions_parser",
    "run_backup",
    "parse_when",
    "run_sessions_cli",
    "run_sessions_command",
    "sessions_export",
    "sessions_list",
    "sessions_search",
    "sessions_show",
    "sessions_stats",
]


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def parse_when(text: str) -> float:
    """`2026-01-31` or an ISO date-time (UTC unless it names a zone) as epoch seconds."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (use YYYY-MM-DD)") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def add_sessions_parser(sub: Any) -> None:
    """Add `sessions` and its actions to the `hermes` sub-parsers."""
    sessions = sub.add_parser(
        "sessions",
        help="list, show, search and export stored sessions",
        description="The session store: every conversation of every platform, archived rows "
        "included.",
    )
    actions = sessions.add_subparsers(dest="sessions_command", metavar="ACTION", required=True)
    lst = actions.add_parser("list", help="sessions, most recently updated first")
    lst.add_argument("--limit", type=int, default=50, help="at most this many (default: 50)")
    lst.add_argument("--platform", help="only this platform: terminal, telegram, discord, http")
    lst.add_argument(
        "--owner", help="only this owner's, e.g. telegram:111, http:alice (docs/privacy.md)"
    )
    lst.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    show = actions.add_parser("show", help="print a session's transcript")
    show.add_argument("session_id", help="the id, as `sessions list` shows it")
    show.add_argument("--all", action="store_true", help="include archived (compacted) rows")
    show.add_argument("--json", action="store_true", help="the messages as one JSON array")
    search = actions.add_parser("search", help="full-text search over every message")
    search.add_argument("query", help="words to find (full-text search)")
    search.add_argument("--session", metavar="ID", help="only in this session")
    search.add_argument("--platform", help="only sessions of this platform")
    search.add_argument("--owner", help="only sessions of this owner, e.g. http:alice")
    search.add_argument(
        "--role", choices=["system", "user", "assistant", "tool"], help="only messages of this role"
    )
    search.add_argument("--since", type=parse_when, help="YYYY-MM-DD (UTC)")
    search.add_argument("--until", type=parse_when, help="YYYY-MM-DD (UTC), exclusive")
    search.add_argument(
        "--limit", type=int, default=20, help="at most this many hits (default: 20)"
    )
    search.add_argument("--json", action="store_true", help="the hits as one JSON array")
    export = actions.add_parser("export", help="write a whole session as JSON Lines or Markdown")
    export.add_argument("session_id", help="the id, as `sessions list` shows it")
    export.add_argument(
        "--format", choices=["jsonl", "md"], default="jsonl", help="jsonl or md (default: jsonl)"
    )
    stats = actions.add_parser("stats", help="counts and token totals")
    stats.add_argument("--json", action="store_true", help="one JSON object")
    backup = actions.add_parser(
        "backup", help="copy state.db while the gateway runs (SQLite online backup)"
    )
    backup.add_argument(
        "--to", type=Path, default=None, help="default: HERMES_HOME/backups/state-<time>.db"
    )
    compress = actions.add_parser("compress", help="compact a stored session now")
    compress.add_argument("session_id", help="the id, as `sessions list` shows it")
    compress.add_argument("--focus", help="what the summary should concentrate on")


class ShownReads(Protocol):
    """The roles `hermes sessions show` reads (`state.contract`)."""

    @property
    def sessions(self) -> SessionCatalog: ...

    @property
    def transcript(self) -> Transcript: ...


class StoreReads(ShownReads, Protocol):
    """The roles every `hermes sessions` action reads; `SqlSessionStore` has them."""

    @property
    def search(self) -> SessionSearch: ...


async def run_sessions_command(
    store: StoreReads,
    args: argparse.Namespace,
    *,
    prices: Mapping[str, PriceEntry] | None = None,
) -> str:
    """The text to print for parsed `hermes sessions ...` arguments."""
    match args.sessions_command:
        case "list":
            return await sessions_list(
                store.sessions,
                limit=args.limit,
                platform=args.platform,
                owner=args.owner,
                as_json=args.json,
            )
        case "show":
            return await sessions_show(
                store,
                args.session_id,
                include_archived=args.all,
                as_json=args.json,
                prices=prices,
            )
        case "search":
            return await sessions_search(
                store.search,
                args.query,
                as_json=args.json,
                limit=args.limit,
                session_id=args.session,
                platform=args.platform,
                owner=args.owner,
                role=args.role,
                since=args.since,
                until=args.until,
            )
        case "export":
            return await sessions_export(store.transcript, args.session_id, fmt=args.format)
        case "stats":
            return await sessions_stats(store.sessions, as_json=args.json)
        case unknown:  # argparse only passes the actions it was built with
            raise ValueError(f"unknown sessions action {unknown!r}")


async def run_sessions_cli(
    args: argparse.Namespace, url: str, *, prices: Mapping[str, PriceEntry] | None = None
) -> int:
    """Open the store at `url`, print the command's output; exit 1 with a message on StoreError."""
    try:
        async with await SqlSessionStore.open(url) as store:
            out = await run_sessions_command(store, args, prices=prices)
    except StoreError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return 0


def _session_line(info: SessionInfo) -> str:
    state = f"ended:{info.end_reason}" if info.end_reason else "open"
    title = f"  {info.title}" if info.title else ""
    return (
        f"{info.id}  {info.platform:<9} {_when(info.updated_at)}  "
        f"{info.active_messages:>5}/{info.total_messages:<6} "
        f"in {info.input_tokens:>9,} out {info.output_tokens:>8,}  {state}{title}"
    )


async def sessions_list(
    sessions: SessionCatalog,
    *,
    limit: int = 50,
    platform: str | None = None,
    owner: str | None = None,
    as_json: bool = False,
) -> str:
    """Every owner's sessions (the machine owner's view), or one owner's with `owner`."""
    infos = await sessions.list_sessions(limit=limit, platform=platform, owner=owner)
    if as_json:
        return _json([asdict(i) for i in infos])
    if not infos:
        return "No sessions."
    header = "ID                        PLATFORM  UPDATED (UTC)     ACTIVE/TOTAL  TOKENS"
    return "\n".join([header, *(_session_line(i) for i in infos)])


def _archived_mark(msg: ChatMessage) -> str:
    """`archived: undo`: set aside, and by what (a compaction, /retry, /undo, ...)."""
    reason = msg.get("_archived_by")
    return f"archived: {reason}" if isinstance(reason, str) else "archived"


def _message_block(msg: ChatMessage) -> str:
    marks = [
        m
        for m, on in (
            ("summary", msg.get("_kind") == "summary"),
            (_archived_mark(msg), msg.get("_active") is False),
        )
        if on
    ]
    tag = f" [{', '.join(marks)}]" if marks else ""
    name = f" {msg['name']}" if msg.get("name") else ""
    head = f"#{msg.get('_id')} {msg.get('role')}{name}{tag}  {_when(msg.get('_created_at') or 0)}"
    body = [content_text(msg)] if content_text(msg) else []
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") or {}
        body.append(f"-> {fn.get('name')}({fn.get('arguments', '')})")
    return "\n".join([head, *("    " + line for text in body for line in text.splitlines())])


async def sessions_show(
    store: ShownReads,
    session_id: str,
    *,
    include_archived: bool = False,
    as_json: bool = False,
    prices: Mapping[str, PriceEntry] | None = None,
) -> str:
    """The active transcript (or every row, archived ones marked); StoreError if unknown.

    The text form starts with the session's token totals, cache hit ratio and estimated cost.
    """
    messages = await store.transcript.show(session_id, include_archived=include_archived)
    if as_json:
        return _json([message_record(m) for m in messages])
    info = await store.sessions.get_session(session_id)
    header = _usage_header(info, prices or {}) if info is not None else ""
    if not messages:
        return f"{header}Session {session_id} has no messages."
    return header + "\n\n".join(_message_block(m) for m in messages)


def _usage_header(info: SessionInfo, prices: Mapping[str, PriceEntry]) -> str:
    from agent.pricing import format_usage_summary

    compactions = f"Compactions: {info.compactions} batch, {info.micro_compactions} micro"
    summary = format_usage_summary(info.usage, info.model or "", prices)
    return f"Session {info.id} ({info.platform}, model {info.model or '?'})\n{summary}\n{compactions}\n\n"


async def sessions_search(
    search: SessionSearch, query: str, *, as_json: bool = False, limit: int = 20, **filters: Any
) -> str:
    hits = await search.search(query, limit=limit, **filters)
    if as_json:
        return _json([asdict(h) for h in hits])
    if not hits:
        return f"No messages match {query!r}."
    return "\n".join(
        f"{h.session_id}  #{h.message_id:<8} {h.role:<9} {_when(h.created_at)}"
        f"{'  [archived]' if not h.active else ''}\n    {h.snippet}"
        for h in hits
    )


async def sessions_export(
    transcript: Transcript, session_id: str, *, fmt: ExportFormat = "jsonl"
) -> str:
    return await transcript.export(session_id, fmt)


async def sessions_stats(sessions: SessionCatalog, *, as_json: bool = False) -> str:
    stats = await sessions.stats()
    if as_json:
        return _json(stats)
    tokens, comp = stats["tokens"], stats["compactions"]
    platforms = ", ".join(f"{k} {v}" for k, v in sorted(stats["platforms"].items())) or "none"
    rows = [
        (
            "store",
            f"{stats['dialect']} (schema v{stats['schema_version']}), "
            f"{stats['db_bytes'] / 1_048_576:.1f} MiB",
        ),
        ("sessions", f"{stats['sessions']} ({stats['open_sessions']} open); {platforms}"),
        (
            "messages",
            f"{stats['messages']:,} ({stats['active_messages']:,} active, "
            f"{stats['archived_messages']:,} archived, {stats['summary_messages']} summaries)",
        ),
        (
            "tokens",
            f"in {tokens['input']:,}, out {tokens['output']:,}, "
            f"cache write {tokens['cache_write']:,}, cache read {tokens['cache_read']:,}",
        ),
        ("compactions", f"batch {comp['batch']}, micro {comp['micro']}, native {comp['native']}"),
    ]
    return "\n".join(f"{k:<12} {v}" for k, v in rows)


def run_backup(url: str, home: Path, target: Path | None, *, now: float | None = None) -> int:
    """`hermes sessions backup`: copy the SQLite store, print where to and what it holds."""
    from state.backup import backup_sqlite, sqlite_path

    try:
        source = sqlite_path(url)
        stamp = datetime.fromtimestamp(now, tz=UTC) if now else datetime.now(tz=UTC)
        path = target or home / "backups" / f"state-{stamp:%Y%m%d-%H%M%S}.db"
        result = backup_sqlite(source, path.expanduser())
    except StoreError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1
    print(
        f"Backed up {source} to {result.path}: {result.bytes:,} bytes, "
        f"{result.sessions} sessions, {result.messages} messages."
    )
    return 0
