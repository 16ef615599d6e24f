"""The HTTP API takes images: the openai SDK sends an image (a data URL) on Chat Completions and
Responses and the model receives it; the bytes are stored once for the key's owner, never in a
row; a 30 MB image is a 413 in the OpenAI error envelope; an image from a private address, an
audio part or an image in an assistant message is a 400; one key cannot reach another's files."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import openai
import pytest
from sqlalchemy import text

from tests.agent.media.images import jpeg, png
from tests.integration.http_api import Served, envelope_of, serve

ALICE_KEY, BOB_KEY = "sk-alice-media", "sk-bob-media"
KEYS = {
    "api_key": None,
    "keys": [
        {"name": "alice", "key_env": "ALICE_KEY", "role": "user", "tools": []},
        {"name": "bob", "key_env": "BOB_KEY", "role": "user", "tools": []},
    ],
}
ENV = {"ALICE_KEY": ALICE_KEY, "BOB_KEY": BOB_KEY}


def _data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _photo_message(url: str, caption: str = "what colour is this?") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": caption},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }


def _sent_user(api: Served, wire: str) -> Any:
    body = api.llm.api_requests(wire)[-1].json
    assert body is not None
    return [m for m in body["messages"] if m["role"] == "user"][-1]["content"]


async def _rows(api: Served) -> list[str]:
    store = api.runtime.store
    async with store._engine.connect() as conn:
        found = await conn.execute(
            text(
                "SELECT coalesce(content,'') || coalesce(CAST(blocks AS TEXT),'') || coalesce(CAST(extra AS TEXT),'') FROM messages"
            )
        )
        return [str(r[0]) for r in found]


async def test_sdk_sends_an_image_and_the_model_receives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chat Completions with an image_url data URL: the Anthropic route gets a native image
    block and the caption; the store holds a reference, not the base64."""
    image = png(200, 100)
    async with serve(tmp_path, monkeypatch, model={"vision": True}) as api:
        client = api.client()
        reply = await client.chat.completions.create(
            model="test-model", messages=[_photo_message(_data_url(image))]
        )
        await client.close()
        assert reply.choices[0].message.content
        content = _sent_user(api, "anthropic")
        assert content[0] == {"type": "text", "text": "what colour is this?"}
        assert content[1]["type"] == "image" and content[1]["source"]["type"] == "base64"
        rows = await _rows(api)
        encoded = base64.b64encode(image).decode()
        assert rows and not any(encoded[:200] in r for r in rows)
        assert any('"_media"' in r for r in rows)
        assert [p for p in (tmp_path / "media").rglob("*") if p.is_file()]


async def test_openai_route_receives_an_image_url_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same request on an OpenAI model arrives as an image_url part (re-encoded JPEG)."""
    from sim.llm_server import FakeLLM

    async with FakeLLM() as llm:
        model = {"provider": "openai", "base_url": llm.openai_base_url, "default": "gpt-4o"}
        async with serve(tmp_path, monkeypatch, llm=llm, model=model) as api:
            client = api.client()
            await client.chat.completions.create(
                model="gpt-4o", messages=[_photo_message(_data_url(jpeg(300, 300), "image/jpeg"))]
            )
            await client.close()
            content = _sent_user(api, "openai")
    assert content[0]["text"] == "what colour is this?"
    assert content[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


async def test_responses_input_image_reaches_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Responses: an `input_image` part with a data URL is stored and reaches the model."""
    async with serve(tmp_path, monkeypatch, model={"vision": True}) as api:
        client = api.client()
        response = await client.responses.create(
            model="test-model",
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "describe"},
                        {
                            "type": "input_image",
                            "image_url": _data_url(png(50, 50)),
                            "detail": "auto",
                        },
                    ],
                }
            ],
        )
        await client.close()
        assert response.output_text
        content = _sent_user(api, "anthropic")
        assert [b["type"] for b in content] == ["text", "image"]


async def test_a_30_mb_image_is_a_413_in_the_envelope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 30 MB image (40 MB as base64) is refused as too large, in the OpenAI envelope; nothing
    reaches the model or the store; the next request works."""
    huge = b"\xff\xd8\xff\xe0" + b"\x00" * (30 * 1024 * 1024)
    async with serve(tmp_path, monkeypatch) as api:
        body = {"model": "test-model", "messages": [_photo_message(_data_url(huge, "image/jpeg"))]}
        async with api.http.post(
            f"{api.base}/v1/chat/completions", json=body, headers=api.auth()
        ) as response:
            assert response.status == 413
            error = envelope_of(await response.json())
            assert "20 MB" in error["message"]
        assert api.llm.api_requests("anthropic") == []
        client = api.client()
        reply = await client.chat.completions.create(
            model="test-model", messages=[{"role": "user", "content": "still there?"}]
        )
        await client.close()
        assert reply.choices[0].message.content


async def test_an_image_just_over_the_limit_is_a_413_naming_the_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image that fits the body but not the image limit: 413 with `param` at the part."""
    over = b"\x89PNG\r\n\x1a\n" + b"\x00" * (20 * 1024 * 1024 + 10)
    async with serve(tmp_path, monkeypatch) as api:
        client = api.client()
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(
                model="test-model", messages=[_photo_message(_data_url(over))]
            )
        await client.close()
    assert caught.value.status_code == 413
    assert isinstance(caught.value.body, dict)
    assert caught.value.body.get("param") == "messages[0].content[1]"


@pytest.mark.parametrize(
    ("part", "message"),
    [
        ({"type": "image_url", "image_url": {"url": "https://127.0.0.1/cat.png"}}, "public"),
        ({"type": "image_url", "image_url": {"url": "https://10.1.2.3/cat.png"}}, "public"),
        ({"type": "image_url", "image_url": {"url": "https://[::1]/cat.png"}}, "public"),
        ({"type": "image_url", "image_url": {"url": "https://localhost/cat.png"}}, "public"),
        ({"type": "image_url", "image_url": {"url": "http://example.com/cat.png"}}, "https"),
        ({"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}, "base64"),
        (
            {"type": "image_url", "image_url": {"url": "data:text/plain;base64,aGVsbG8="}},
            "not an image",
        ),
        ({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}, "input_audio"),
    ],
)
async def test_parts_that_cannot_be_taken_are_a_400(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, part: dict[str, Any], message: str
) -> None:
    """Private and loopback hosts are never fetched; http, bad base64, non-images and audio
    are refused with a sentence naming the part; no session is made."""
    async with serve(tmp_path, monkeypatch) as api:
        client = api.client()
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="test-model",
                messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}],
            )
        await client.close()
        assert message in caught.value.message
        assert await api.runner.store.sessions.list_sessions() == []
    assert api.llm.api_requests("anthropic") == []


async def test_one_key_cannot_reach_anothers_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice's image is stored for http:alice; Bob, knowing its hash, reads nothing."""
    from state import sha256_of

    image = png(64, 64)
    async with serve(tmp_path, monkeypatch, environ=ENV, gateway={"http": KEYS}) as api:
        client = api.client(ALICE_KEY)
        await client.chat.completions.create(
            model="test-model", messages=[_photo_message(_data_url(image))]
        )
        await client.close()
        media = api.runtime.media
        sha = sha256_of(image)
        assert await media.read("http:alice", sha) == image
        assert await media.read("http:bob", sha) is None
        assert await media.info("http:bob", sha) is None


async def test_a_stateless_client_resending_the_image_continues_its_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OpenAI client resends the whole conversation, image included: the second request is
    recognised as the same conversation (same session), the image is stored once, and the
    model still sees it in the earlier turn."""
    image = png(80, 60)
    async with serve(tmp_path, monkeypatch, model={"vision": True}) as api:
        client = api.client()
        first_messages = [_photo_message(_data_url(image))]
        first = await client.chat.completions.with_raw_response.create(
            model="test-model", messages=first_messages
        )
        answer = first.parse().choices[0].message.content
        second = await client.chat.completions.with_raw_response.create(
            model="test-model",
            messages=[
                *first_messages,
                {"role": "assistant", "content": answer},
                {"role": "user", "content": "and is it poisonous?"},
            ],
        )
        await client.close()
        session = first.headers["X-Hermes-Session-Id"]
        assert second.headers["X-Hermes-Session-Id"] == session
        assert len(await api.runner.store.sessions.list_sessions()) == 1
        files = [p for p in (tmp_path / "media").rglob("*") if p.is_file()]
        assert len(files) == 1
        body = api.llm.api_requests("anthropic")[-1].json
        assert body is not None
        kinds = [
            b["type"]
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
        ]
        assert kinds.count("image") == 1
