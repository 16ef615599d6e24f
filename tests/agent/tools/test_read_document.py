"""`read_document`: a long document the person sent, read page by page from the media store,
only by its owner."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.access import Principal
from agent.errors import ToolError
from agent.tools.read_document import read_document_tool
from agent.tools.registry import ToolContext
from state import MediaStore, SqlSessionStore
from tests.agent.media.images import pdf

ALICE = Principal(platform="telegram", id="1001")
BOB = Principal(platform="telegram", id="1002")


@pytest.fixture
async def media(tmp_path: Path) -> AsyncIterator[MediaStore]:
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    try:
        yield MediaStore(store, tmp_path / "media")
    finally:
        await store.aclose()


def _ctx(media: MediaStore, principal: Principal, max_chars: int = 1_000) -> ToolContext:
    return ToolContext(
        session_id="s", principal=principal, services={"media": media}, max_output_chars=max_chars
    )


async def test_pages_through_the_owners_document(media: MediaStore) -> None:
    """Each page says where the next starts; the last says it is the end."""
    text = "".join(f"paragraph {i:04d}\n" for i in range(300))
    stored = await media.put(ALICE.owner, text.encode(), kind="text", mime="text/plain")
    handler = read_document_tool().handler
    first = await handler({"media": f"media:{stored.sha256}"}, _ctx(media, ALICE))
    assert first.startswith("paragraph 0000") and "continue with offset=1000" in first
    last = await handler({"media": stored.sha256, "offset": 4000}, _ctx(media, ALICE))
    assert "paragraph 0299" in last and "end of document" in last


async def test_reads_a_pdf(media: MediaStore) -> None:
    """A stored PDF is read through its text layer."""
    stored = await media.put(
        ALICE.owner, pdf("Clause 7: notice period"), kind="pdf", mime="application/pdf"
    )
    out = await read_document_tool().handler({"media": stored.sha256}, _ctx(media, ALICE))
    assert "Clause 7: notice period" in out


async def test_another_person_gets_nothing(media: MediaStore) -> None:
    """Bob, with Alice's hash, is told there is no such document of his."""
    stored = await media.put(ALICE.owner, b"alice's contract", kind="text", mime="text/plain")
    with pytest.raises(ToolError, match="no such document"):
        await read_document_tool().handler({"media": stored.sha256}, _ctx(media, BOB))


@pytest.mark.parametrize("ref", ["", "media:abc", "../../etc/passwd", "media:" + "G" * 64])
async def test_bad_references_are_refused(media: MediaStore, ref: str) -> None:
    """Anything but a sha256 is a ToolError, never a path."""
    with pytest.raises(ToolError):
        await read_document_tool().handler({"media": ref}, _ctx(media, ALICE))
