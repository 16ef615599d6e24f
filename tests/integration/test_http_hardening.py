"""No client and no fault wedges the HTTP API (issue 19): slow bodies and slow headers are cut
off while normal requests are served, connections past the cap get a quick 503, a full store is
a 503 with Retry-After and service resumes by itself, and random bytes or text at the door
never produce a 5xx, a 200 carrying an error, or a stored row for refused input.

Contracts: RFC 9110 §15.5.9 (408 Request Timeout), §15.6.4 (503 with `Retry-After`); SQLite
answers SQLITE_FULL once `PRAGMA max_page_count` is reached (https://sqlite.org/rescode.html#full).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.http import SESSION_HEADER
from tests.gateway.harness import MODEL
from tests.integration.http_api import KEY, envelope_of, serve
from tests.waits import SLOW_WAIT_S, WAIT_S

READ_TIMEOUT_S = 1.0
SLOW_CLIENTS = 100


async def _slow_body(port: int) -> tuple[float, bytes]:
    """Headers and a tenth of the promised body, then silence; (seconds until the server
    closed the connection, what it answered)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        + f"Authorization: Bearer {KEY}\r\n".encode()
        + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        + b'{"messages": ['
    )
    await writer.drain()
    async with asyncio.timeout(30):
        answer = await reader.read()  # until the server closes
    writer.close()
    return time.monotonic() - started, answer


async def test_slow_bodies_are_cut_off_and_normal_requests_still_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 connections that never finish their body are each answered 408 and closed within
    the read timeout (not held open for 40 s), and a normal request meanwhile is answered."""
    async with serve(
        tmp_path, monkeypatch, gateway={"http": {"read_timeout_s": READ_TIMEOUT_S}}
    ) as api:
        assert api.server.port is not None
        slow = [asyncio.create_task(_slow_body(api.server.port)) for _ in range(SLOW_CLIENTS)]
        client = api.client()
        started = time.monotonic()
        reply = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "still there?"}]
        )
        served_in = time.monotonic() - started
        await client.close()
        results = await asyncio.gather(*slow)
    assert reply.choices[0].message.content == "echo: still there?"
    assert served_in < READ_TIMEOUT_S
    held = sorted(seconds for seconds, _ in results)
    assert held[-1] < READ_TIMEOUT_S + 1.0, held[-5:]  # no lingering on top of the timeout
    for _, answer in results:
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split(b" ")[1] == b"408"
        assert envelope_of(json.loads(body))["message"].startswith("the request body did not")


async def test_a_slow_header_connection_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that sends half a request head and stops is disconnected after the timeout."""
    async with serve(
        tmp_path, monkeypatch, gateway={"http": {"read_timeout_s": READ_TIMEOUT_S}}
    ) as api:
        reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port)
        started = time.monotonic()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthori")
        await writer.drain()
        async with asyncio.timeout(READ_TIMEOUT_S + 5.0):
            await reader.read()
        held = time.monotonic() - started
        writer.close()
    assert held < READ_TIMEOUT_S + 4.0


async def _wait_for(condition: Any) -> None:
    """Polling: aiohttp's server counts a connection without telling anyone."""
    async with asyncio.timeout(WAIT_S):
        while not condition():  # noqa: ASYNC110 - see the docstring
            await asyncio.sleep(0.01)


async def test_connections_past_the_cap_get_a_quick_json_503(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `max_connections: 3` and three idle connections open, a fourth is answered 503
    with Retry-After at once; once they close, requests are served again."""
    async with serve(tmp_path, monkeypatch, gateway={"http": {"max_connections": 3}}) as api:
        idle = [await asyncio.open_connection("127.0.0.1", api.server.port) for _ in range(3)]
        await _wait_for(lambda: api.server.open_connections == 3)
        started = time.monotonic()
        async with api.http.get(f"{api.base}/health") as response:
            status, retry = response.status, response.headers.get("Retry-After")
            error = envelope_of(await response.json())
        refused_in = time.monotonic() - started
        for _, writer in idle:
            writer.close()
        await _wait_for(lambda: api.server.open_connections == 0)
        async with api.http.get(f"{api.base}/health") as after:
            assert after.status == 200
        assert api.server.refused_connections == 1
    assert (status, retry, error["code"]) == (503, "1", "too_many_connections")
    assert refused_in < 1.0


def _sqlite(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


async def test_a_full_store_is_a_503_with_retry_after_and_service_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLITE_FULL mid-turn: 503 with Retry-After and code store_full, never a 200 with a
    warning; once space is back (the page limit raised) the next request succeeds."""
    async with serve(tmp_path, monkeypatch) as api:
        # The refused turn is logged before the 503 goes out, its traceback rendered with the
        # locals of a 150 kB message: seconds on a loaded 2-core machine, past the 5 s the client
        # once allowed. The client waits for that answer; the bound only keeps a server that
        # never answers from hanging the test.
        client = api.client(timeout_s=SLOW_WAIT_S)
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "before"}]
        )
        session = {SESSION_HEADER: raw.headers[SESSION_HEADER]}
        store = api.runner.store
        pages = _sqlite(tmp_path / "state.db").execute("PRAGMA page_count").fetchone()[0]
        limit = f"PRAGMA max_page_count = {pages}"
        await store._write("limit", lambda conn: conn.exec_driver_sql(limit))  # type: ignore[attr-defined]
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "y" * 150_000}],
                extra_headers=session,
            )
        await store._write(  # type: ignore[attr-defined]
            "unlimit", lambda conn: conn.exec_driver_sql("PRAGMA max_page_count = 1073741823")
        )
        after = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "after"}], extra_headers=session
        )
        await client.close()
    assert caught.value.status_code == 503
    assert caught.value.code == "store_full"
    assert caught.value.response.headers["Retry-After"] == "30"
    assert after.choices[0].message.content == "echo: after"  # the refused turn left no trace


# -- random input at the door ----------------------------------------------------------------

_HOSTILE = st.sampled_from(["\ud800", "\udcff", "\x00", "\ufffd", "a", "é", " ", "\n", "😀"])
_TEXT = st.one_of(st.text(max_size=200), st.text(alphabet=_HOSTILE, max_size=40)).filter(
    lambda t: not t.lstrip().startswith("/")  # a command is answered, not refused: elsewhere
)
_BODY = st.one_of(
    st.binary(max_size=300),
    _TEXT.map(lambda t: json.dumps({"model": MODEL, "messages": [{"role": "user", "content": t}]})),
    st.dictionaries(
        st.sampled_from(["model", "messages", "stream", "user", "x"]),
        st.one_of(st.none(), st.booleans(), st.integers(), _TEXT, st.lists(_TEXT, max_size=3)),
        max_size=5,
    ).map(json.dumps),
)


async def _door(tmp: Path, monkeypatch: pytest.MonkeyPatch, bodies: list[str | bytes]) -> None:
    async with serve(tmp, monkeypatch) as api:
        url = f"{api.base}/v1/chat/completions"
        headers = {**api.auth(), "Content-Type": "application/json"}
        for body in bodies:
            data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
            before = len(await api.runner.store.sessions.list_sessions(limit=1000))
            async with api.http.post(url, data=data, headers=headers) as response:
                status, answer = response.status, await response.read()
            sessions = await api.runner.store.sessions.list_sessions(limit=1000)
            assert status < 500, answer
            parsed = json.loads(answer)
            if status != 200:
                envelope_of(parsed)
                assert len(sessions) == before, "a refused request left a session"
                continue
            content = parsed["choices"][0]["message"]["content"]
            assert not content.startswith("⚠️"), content
            assert len(sessions) == before + 1
            stored = await api.runner.store.transcript.load_active(response.headers[SESSION_HEADER])
            roles = [m["role"] for m in stored if m["role"] != "system"]
            assert roles == ["user", "assistant"], "an orphan or half-written session"


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(bodies=st.lists(_BODY, min_size=1, max_size=6))
def test_random_bodies_never_5xx_never_200_with_an_error_never_store_refused_input(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    bodies: list[str | bytes],
) -> None:
    """Random bytes, random JSON and random Unicode message text (lone surrogates included):
    each answer is a 200 completion (one session, user + assistant stored) or a 4xx envelope
    with nothing stored."""
    asyncio.run(_door(tmp_path_factory.mktemp("door"), monkeypatch, bodies))
