"""`hermes sessions compress ID [--focus TEXT]`: compact a stored session from the shell."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from agent.config import HermesConfig
from agent.errors import CompactionRefused, HermesError
from cli.runtime import Runtime

__all__ = ["run_compress"]


async def run_compress(
    args: argparse.Namespace, config: HermesConfig, home: Path, environ: Mapping[str, str]
) -> int:
    """Compact one session now; exit 1 with the reason when there is nothing to gain."""
    try:
        async with await Runtime.start(config, home, environ) as runtime:
            if await runtime.store.sessions.get_session(args.session_id) is None:
                print(f"hermes: no session {args.session_id!r}", file=sys.stderr)
                return 2
            # A gateway may be serving the session: wait for its turn to end, hold the lock.
            async with runtime.lock_session(args.session_id):
                agent = await runtime.open_agent(args.session_id)
                try:
                    result = await agent.compress(focus=args.focus, reason="manual")
                except CompactionRefused as exc:
                    print(f"Nothing compacted: {exc.reason}")
                    return 1
    except HermesError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1
    print(
        f"Compacted {agent.session_id}: {result.messages_before} → {result.messages_after} "
        f"messages, {result.tokens_before:,} → {result.tokens_after:,} tokens "
        f"({result.outcome}, {result.duration_ms:.0f} ms)."
    )
    return 0
