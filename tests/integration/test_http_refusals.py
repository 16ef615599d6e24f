"""Every refusal of the HTTP API is a 4xx/5xx in the OpenAI error envelope (issues 12 and 19):
asserted with the real openai SDK's exception classes, and with raw aiohttp / a raw socket for
what aiohttp itself refuses before a route runs.

Contracts: OpenAI API reference, "Error codes" (status → meaning, the envelope's fields); the
openai SDK maps 400 → BadRequestError, 401 → AuthenticationError, 404 → NotFoundError,
409 → ConflictError, 422 → UnprocessableEntityError, 429 → RateLimitError, ≥ 500 →
InternalServerError, and raises APIError for an `error` event inside a stream; RFC 9110
(405 with `Allow`, 413, `Retry-After`), RFC 6585 §5 (431).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import openai
import pytest

from gateway.http import SESSION_HEADER
from sim.llm_server import ToolCallSpec, Turn
from tests.gateway.harness import MODEL
from tests.integration.http_api import KEY, Served, envelope_of, serve
from tests.waits import WAIT_S

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Served:  # type: ignore[misc]
    async with serve(tmp_path, monkeypatch, tools={"enabled": ["read_file"]}) as served:
        yield served


async def test_a_missing_messages_field_names_it_without_library_internals(api: Served) -> None:
    """`messages` missing: a 400 saying `messages is required` with param "messages", not
    pydantic's model name or its documentation URL; `messages: null` from the SDK likewise."""
    url = f"{api.base}/v1/chat/completions"
    async with api.http.post(url, json={"model": MODEL}, headers=api.auth()) as response:
        assert response.status == 400
        error = envelope_of(await response.json())
    assert (error["message"], error["param"]) == ("messages is required", "messages")
    client = api.client()
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model=MODEL, messages=None)  # type: ignore[arg-type]
    await client.close()
    assert caught.value.param == "messages"
    assert "messages" in caught.value.message
    for internal in ("_ChatBody", "pydantic", "errors.pydantic.dev"):
        assert internal not in str(caught.value.body)
    assert api.llm.requests == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"messages": "hi"}', "messages: input should be a valid list"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "stream": [1]}', "stream:"),
        (b'{"messages": [{"role": "assistant", "content": "hi"}]}', "user message"),
        (b"\xff\xfe garbage", "not valid JSON"),
    ],
)
async def test_malformed_bodies_are_400s_in_the_envelope(
    api: Served, body: bytes, expected: str
) -> None:
    """Bodies that are not JSON, not an object, or do not fit the schema: 400 and a sentence."""
    headers = {**api.auth(), "Content-Type": "application/json"}
    async with api.http.post(
        f"{api.base}/v1/chat/completions", data=body, headers=headers
    ) as response:
        assert response.status == 400
        error = envelope_of(await response.json())
    assert error["type"] == "invalid_request_error" and expected in error["message"]
    assert api.llm.requests == []


async def test_unknown_route_wrong_method_and_big_body_answer_json(api: Served) -> None:
    """aiohttp's own 404, 405 (with `Allow`) and 413 come back in the envelope, not text/plain."""
    async with api.http.get(f"{api.base}/v1/nothing", headers=api.auth()) as response:
        assert response.status == 404
        assert response.content_type == "application/json"
        assert "no route GET /v1/nothing" in envelope_of(await response.json())["message"]
    async with api.http.get(f"{api.base}/v1/chat/completions", headers=api.auth()) as response:
        assert response.status == 405
        assert "POST" in response.headers["Allow"]
        assert envelope_of(await response.json())["type"] == "invalid_request_error"
    big = b'{"messages": "' + b"x" * (29 * 1024 * 1024) + b'"}'
    headers = {**api.auth(), "Content-Type": "application/json"}
    async with api.http.post(
        f"{api.base}/v1/chat/completions", data=big, headers=headers
    ) as response:
        assert response.status == 413
        assert "larger than 28 MiB" in envelope_of(await response.json())["message"]


async def test_an_oversized_header_is_a_json_431(api: Served) -> None:
    """A 100 KB header: aiohttp's parser refuses it (LineTooLong) before any route; the client
    still gets JSON: 431 Request Header Fields Too Large."""
    headers = {**api.auth(), "X-Padding": "a" * 100_000}
    async with api.http.get(f"{api.base}/v1/models", headers=headers) as response:
        assert response.status == 431
        error = envelope_of(await response.json())
    assert "header" in error["message"]


async def test_a_request_that_is_not_http_is_a_json_400(api: Served) -> None:
    """Garbage on the socket: aiohttp's parser answers 400, in the envelope."""
    reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port)
    writer.write(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n")
    await writer.drain()
    async with asyncio.timeout(WAIT_S):
        raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"400"
    assert b"application/json" in head
    assert b'"type": "invalid_request_error"' in body


async def test_authentication_failures_are_401_in_the_envelope(api: Served) -> None:
    client = api.client("wrong")
    with pytest.raises(openai.AuthenticationError) as caught:
        await client.models.list()
    await client.close()
    assert caught.value.type == "authentication_error"


async def test_a_message_over_the_limit_is_a_413_with_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gateway.max_message_chars`: a longer message is refused, nothing is stored."""
    async with serve(tmp_path, monkeypatch, gateway={"max_message_chars": 100}) as api:
        client = api.client()
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "x" * 101}]
            )
        await client.close()
        assert caught.value.status_code == 413
        assert "gateway.max_message_chars allows 100" in caught.value.message
        assert caught.value.code == "message_too_long"
        assert await api.runner.store.sessions.list_sessions() == []
    assert api.llm.requests == []


async def test_a_user_field_longer_than_a_user_id_is_a_400(api: Served) -> None:
    client = api.client()
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model=MODEL, messages=HI, user="u" * 300)
    await client.close()
    assert caught.value.param == "user"
    assert await api.runner.store.sessions.list_sessions() == []


@pytest.mark.parametrize("escaped", ["x\\ud800y", "a\\u0000b", "\\udcff"])
async def test_text_the_store_cannot_keep_is_normalised_not_failed(
    api: Served, escaped: str
) -> None:
    """A lone surrogate or NUL (a JSON escape makes either; the SDK cannot even encode them,
    so the body is written by hand): stored as U+FFFD, answered 200, and the session goes on
    (issue 19: it used to wedge the session)."""
    body = f'{{"model": "{MODEL}", "messages": [{{"role": "user", "content": "{escaped}"}}]}}'
    headers = {**api.auth(), "Content-Type": "application/json"}
    url = f"{api.base}/v1/chat/completions"
    async with api.http.post(url, data=body.encode(), headers=headers) as response:
        assert response.status == 200
        session = response.headers[SESSION_HEADER]
    client = api.client()
    again = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "still here?"}],
        extra_headers={SESSION_HEADER: session},
    )  # fmt: skip
    await client.close()
    assert again.choices[0].message.content == "echo: still here?"
    stored = [
        m for m in await api.runner.store.transcript.load_active(session) if m["role"] == "user"
    ]
    assert "\ufffd" in str(stored[0]["content"]) and "\x00" not in str(stored[0]["content"])


# -- failures of the turn ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("turn", "status", "code"),
    [
        (Turn(error=(500, "api_error", "upstream broke")), 502, "unavailable"),
        (Turn(error=(401, "authentication_error", "bad key")), 502, "auth"),
        (Turn(error=(400, "invalid_request_error", "no such thing")), 502, "bad_request"),
    ],
)
async def test_provider_failures_are_502_with_the_kind(
    api: Served, turn: Turn, status: int, code: str
) -> None:
    """A provider failure is a 502 whose `code` is the provider's error kind, never a 200 with
    a warning; the provider's key never appears."""
    api.llm.script(turn)
    client = api.client()
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model=MODEL, messages=HI)
    await client.close()
    assert caught.value.status_code == status
    assert caught.value.code == code
    assert "test-key" not in str(caught.value.body)


async def test_a_provider_rate_limit_is_a_429_with_retry_after(api: Served) -> None:
    api.llm.script(Turn(error=(429, "rate_limit_error", "slow down"), retry_after_ms=3000))
    client = api.client()
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model=MODEL, messages=HI)
    await client.close()
    assert caught.value.response.headers["Retry-After"] == "3"
    assert caught.value.code == "rate_limited"


async def test_a_streamed_failure_before_the_first_byte_is_a_status(api: Served) -> None:
    api.llm.script(Turn(error=(500, "api_error", "upstream broke")))
    client = api.client()
    with pytest.raises(openai.InternalServerError) as caught:
        stream = await client.chat.completions.create(model=MODEL, messages=HI, stream=True)
        async for _ in stream:
            pass
    await client.close()
    assert caught.value.status_code == 502


async def test_a_failure_after_the_stream_started_is_an_error_event(api: Served) -> None:
    """Text streamed, a tool ran, then the provider failed: the stream carries an `error`
    event (what OpenAI-compatible servers send) and ends; the SDK raises APIError."""
    api.llm.script(
        Turn(text="Let me look.", tool_calls=[ToolCallSpec(name="read_file", arguments='{"path": "x"}')]),
        Turn(error=(500, "api_error", "upstream broke")),
    )  # fmt: skip
    client = api.client()
    pieces: list[str] = []
    with pytest.raises(openai.APIError) as caught:
        stream = await client.chat.completions.create(model=MODEL, messages=HI, stream=True)
        async for chunk in stream:
            pieces += [c.delta.content or "" for c in chunk.choices]
    await client.close()
    assert "".join(pieces) == "Let me look."
    assert "upstream" in caught.value.message or "unavailable" in caught.value.message
    assert "⚠️" not in "".join(pieces)


async def test_a_turn_over_its_step_budget_is_a_422(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve(
        tmp_path, monkeypatch, tools={"enabled": ["read_file"]}, agent={"max_iterations": 1}
    ) as api:
        api.llm.script(Turn(tool_calls=[ToolCallSpec(name="read_file", arguments='{"path": "x"}')]))
        client = api.client()
        with pytest.raises(openai.UnprocessableEntityError) as caught:
            await client.chat.completions.create(model=MODEL, messages=HI)
        await client.close()
    assert caught.value.code == "turn_limit_reached"


async def test_while_draining_requests_get_503_with_retry_after_and_health_stays_up(
    api: Served,
) -> None:
    """Once the runner stops taking turns: 503 + Retry-After for the API, /ready 503, /health
    200 (the process is alive; a balancer takes it out of rotation by /ready)."""
    await api.runner.stop()
    client = api.client()
    with pytest.raises(openai.InternalServerError) as caught:
        await client.chat.completions.create(model=MODEL, messages=HI)
    await client.close()
    assert caught.value.status_code == 503
    assert caught.value.response.headers["Retry-After"]
    async with api.http.get(f"{api.base}/ready") as ready:
        assert ready.status == 503
    async with api.http.get(f"{api.base}/health") as health:
        assert health.status == 200


async def test_every_refusal_keeps_the_key_out_of_the_logs(
    api: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    """Wrong keys, right keys, refusals: neither secret is written anywhere we log."""
    for key in (KEY, "sk-wrong-secret"):
        async with api.http.post(
            f"{api.base}/v1/chat/completions", json={"messages": []}, headers=api.auth(key)
        ):
            pass
    captured = capsys.readouterr()
    logged = captured.out + captured.err
    log_dir = Path(api.runtime.home) / "logs"
    if log_dir.exists():
        logged += "".join(p.read_text(errors="replace") for p in log_dir.glob("*.log*"))
    assert KEY not in logged and "sk-wrong-secret" not in logged
