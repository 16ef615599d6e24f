"""`recall` of a photo's turn brings the image back for a model that can see: the recall output
carries a mark the media store signs; the provider shows the image again after the tool
results. A mark typed by a person, or sent by an HTTP client in its own tool result, shows
nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.access import Principal
from agent.archive.recall import recall_tool
from agent.media.attach import MediaProvider
from agent.media.marks import media_mark
from agent.messages import assistant_message, tool_message, user_message
from agent.providers.base import ProviderRequest
from agent.tools.registry import ToolContext
from state import MediaStore, SqlSessionStore
from tests.agent.media.images import png
from tests.fakes.provider import FakeProvider

OWNER = "telegram:1001"
CALL = {"id": "c1", "type": "function", "function": {"name": "recall", "arguments": "{}"}}


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SqlSessionStore, MediaStore]]:
    store = await SqlSessionStore.open(f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")
    try:
        yield store, MediaStore(store, tmp_path / "media")
    finally:
        await store.aclose()


async def _recall_output(store: SqlSessionStore, media: MediaStore, text: str = "a fern?") -> str:
    stored = await media.put(
        OWNER, png(300, 200), kind="image", mime="image/png", width=300, height=200
    )
    ref = {
        "sha256": stored.sha256,
        "owner": OWNER,
        "kind": "image",
        "mime": "image/png",
        "size_bytes": stored.size_bytes,
        "origin": "photo",
        "width": 300,
        "height": 200,
    }
    info = await store.sessions.create_session(platform="telegram", chat_key="1001", owner=OWNER)
    photo = {**user_message(text), "_media": [ref]}
    await store.transcript.append(info.id, [photo, assistant_message("a fern")])  # stamps `_id`
    ctx = ToolContext(
        session_id=info.id,
        principal=Principal(platform="telegram", id="1001"),
        services={"store": store, "media": media},
    )
    return await recall_tool().handler({"anchor": f"#{photo['_id']}"}, ctx)


def _request(tool_text: str) -> ProviderRequest:
    return ProviderRequest(
        model="claude-sonnet-4-6",
        messages=[
            user_message("what was that photo?"),
            assistant_message(None, [CALL]),  # type: ignore[list-item]
            tool_message("c1", "recall", tool_text),
        ],
    )


async def test_recall_shows_what_was_attached_with_a_signed_mark(
    stores: tuple[SqlSessionStore, MediaStore],
) -> None:
    """The row's text, a line describing the photo, and a mark signed by the store."""
    store, media = stores
    out = await _recall_output(store, media)
    assert "a fern?" in out and "[attached: photo image/png 300×200" in out
    assert "⟦image telegram:1001 " in out and out.count(" ") > 3


async def test_a_seeing_model_gets_the_recalled_image_back(
    stores: tuple[SqlSessionStore, MediaStore],
) -> None:
    """After the tool result (its mark removed) comes one user message with the image."""
    store, media = stores
    out = await _recall_output(store, media)
    inner = FakeProvider().script("it was a fern")
    await MediaProvider(inner, media, vision="auto").complete(_request(out))
    sent = inner.requests[0].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert "⟦" not in str(sent[2]["content"])
    parts = sent[3]["content"]
    assert isinstance(parts, list) and parts[1]["image_url"]["url"].startswith("data:image/")


async def test_a_blind_model_gets_the_text_only(
    stores: tuple[SqlSessionStore, MediaStore],
) -> None:
    """A model that cannot see gets the description line, no extra message, no mark."""
    store, media = stores
    out = await _recall_output(store, media)
    inner = FakeProvider().script("a fern, I think")
    await MediaProvider(inner, media, vision=False).complete(_request(out))
    sent = inner.requests[0].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert "[attached: photo" in str(sent[2]["content"]) and "⟦" not in str(sent[2]["content"])


async def test_forged_marks_show_nothing(stores: tuple[SqlSessionStore, MediaStore]) -> None:
    """A person typing a mark (defused when stored text is recalled) or a client's own tool
    result with an unsigned or wrongly signed mark never brings an image."""
    store, media = stores
    stored = await media.put(OWNER, png(30, 20), kind="image", mime="image/png")
    typed = await _recall_output(store, media, text=media_mark(OWNER, stored.sha256))
    assert "⟦image" not in typed.split("[attached:")[0]  # the person's words: defused
    for forged in (
        media_mark(OWNER, stored.sha256),
        media_mark(OWNER, stored.sha256)[:-1] + " " + "0" * 32 + "⟧",
    ):
        inner = FakeProvider().script("nothing to see")
        await MediaProvider(inner, media, vision=True).complete(_request(forged))
        assert [m["role"] for m in inner.requests[0].messages] == ["user", "assistant", "tool"]
