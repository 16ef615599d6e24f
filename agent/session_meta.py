"""A session's small meta record, typed: the one module that reads and writes it.

The store keeps meta as a JSON object per session; every layer goes through here, so its keys
and their meaning are written down once. Reading is tolerant (a damaged or older record yields
defaults, never an exception); writing touches only the keys it names.

| key                     | owner                        | meaning                                  |
|-------------------------|------------------------------|------------------------------------------|
| `model`                 | `/model`                     | the model this session switched to       |
| `hygiene_failures`      | gateway session hygiene      | consecutive failed hygiene compactions   |
| `hygiene_backoff_until` | gateway session hygiene      | epoch seconds before the next attempt    |
| `micro_compaction`      | micro-compaction             | cursor anchor, failure counts, totals    |
| `codex_boundaries`      | the Codex app-server engine  | thread compactions, oldest first         |
| `last_compaction`       | compaction receipts          | active row ids before it, its range      |
| `memory_owner`          | `MemoryKeeper.bind`          | whose memory the session uses (none: shared chats) |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from state.contract import MetaStore

__all__ = [
    "HygieneMeta",
    "LastCompaction",
    "MicroMeta",
    "SessionMeta",
    "append_codex_boundary",
    "parse_meta",
    "read_meta",
    "write_hygiene",
    "write_last_compaction",
    "write_memory_owner",
    "write_micro",
    "write_model",
]

_MICRO_KEY = "micro_compaction"
_LAST_KEY = "last_compaction"


@dataclass(frozen=True, slots=True, kw_only=True)
class HygieneMeta:
    """Session hygiene's backoff: survives restarts so a failing session is not retried hot."""

    failures: int = 0
    backoff_until: float | None = None
    """Epoch seconds; no hygiene compaction is attempted before then."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MicroMeta:
    """Micro-compaction's persisted state (see `agent.micro_compaction`)."""

    anchor_id: int | None = None
    """Row id of the message just before the cursor."""
    fail_exchange_id: int | None = None
    fail_count: int = 0
    failures_total: int = 0
    defrag_floor: int = 0
    passes_total: int = 0
    tokens_saved_total: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LastCompaction:
    """The last batch compaction, as `/uncompact` and `/bringback` need it (`gateway.receipts`)."""

    before: tuple[int, ...]
    """The active row ids, in order, just before it."""
    range: str = ""
    """What it set aside, as a person types it after /bringback (`12-49`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMeta:
    """Everything the meta record holds, with defaults for what it does not."""

    model: str | None = None
    hygiene: HygieneMeta = field(default_factory=HygieneMeta)
    micro: MicroMeta = field(default_factory=MicroMeta)
    codex_boundaries: tuple[Mapping[str, Any], ...] = ()
    last_compaction: LastCompaction | None = None
    memory_owner: str | None = None


def parse_meta(raw: Mapping[str, Any]) -> SessionMeta:
    """The typed record of a stored meta object; unknown or malformed values become defaults."""
    model = raw.get("model")
    boundaries = raw.get("codex_boundaries")
    micro = raw.get(_MICRO_KEY)
    last = raw.get(_LAST_KEY)
    owner = raw.get("memory_owner")
    return SessionMeta(
        memory_owner=owner if isinstance(owner, str) and owner else None,
        model=model if isinstance(model, str) and model else None,
        hygiene=HygieneMeta(
            failures=_int(raw.get("hygiene_failures")) or 0,
            backoff_until=_float(raw.get("hygiene_backoff_until")),
        ),
        micro=_micro(micro) if isinstance(micro, Mapping) else MicroMeta(),
        codex_boundaries=tuple(b for b in boundaries if isinstance(b, Mapping))
        if isinstance(boundaries, list)
        else (),
        last_compaction=_last(last) if isinstance(last, Mapping) else None,
    )


async def read_meta(meta: MetaStore, session_id: str) -> SessionMeta:
    return parse_meta(await meta.get_meta(session_id))


async def write_model(meta: MetaStore, session_id: str, model: str | None) -> None:
    await meta.update_meta(session_id, model=model)


async def write_hygiene(meta: MetaStore, session_id: str, hygiene: HygieneMeta) -> None:
    """Store the backoff; a clean state (no failures) removes the keys."""
    if hygiene.failures <= 0:
        await meta.update_meta(session_id, hygiene_failures=None, hygiene_backoff_until=None)
        return
    await meta.update_meta(
        session_id, hygiene_failures=hygiene.failures, hygiene_backoff_until=hygiene.backoff_until
    )


async def write_memory_owner(meta: MetaStore, session_id: str, owner: str | None) -> None:
    await meta.update_meta(session_id, memory_owner=owner)


async def write_micro(meta: MetaStore, session_id: str, micro: MicroMeta) -> None:
    await meta.update_meta(session_id, **{_MICRO_KEY: asdict(micro)})


async def append_codex_boundary(
    meta: MetaStore, session_id: str, record: Mapping[str, Any]
) -> None:
    """Add one thread-compaction record (the session's own turns are serialised, so a read
    followed by a write cannot lose a concurrent record)."""
    current = await read_meta(meta, session_id)
    boundaries = [dict(b) for b in current.codex_boundaries] + [dict(record)]
    await meta.update_meta(session_id, codex_boundaries=boundaries)


async def write_last_compaction(
    meta: MetaStore, session_id: str, last: LastCompaction | None
) -> None:
    """Remember the last compaction (None: it was undone, nothing to undo)."""
    value = None if last is None else {"before": list(last.before), "range": last.range}
    await meta.update_meta(session_id, **{_LAST_KEY: value})


def _last(raw: Mapping[str, Any]) -> LastCompaction | None:
    before = raw.get("before")
    if not isinstance(before, list) or not before:
        return None
    ids = tuple(i for i in (_int(v) for v in before) if i is not None)
    if len(ids) != len(before):
        return None
    shown = raw.get("range")
    return LastCompaction(before=ids, range=shown if isinstance(shown, str) else "")


def _micro(raw: Mapping[str, Any]) -> MicroMeta:
    return MicroMeta(
        anchor_id=_int(raw.get("anchor_id")),
        fail_exchange_id=_int(raw.get("fail_exchange_id")),
        fail_count=_int(raw.get("fail_count")) or 0,
        failures_total=_int(raw.get("failures_total")) or 0,
        defrag_floor=_int(raw.get("defrag_floor")) or 0,
        passes_total=_int(raw.get("passes_total")) or 0,
        tokens_saved_total=_int(raw.get("tokens_saved_total")) or 0,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
