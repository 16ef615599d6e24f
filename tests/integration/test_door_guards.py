"""The smaller guards of issue 33: a 10,000-deep JSON body is a 400, `/ready` is not ready while
the model endpoint is dead or the store's disk is full, an empty `state.db` is refused with a
sentence, and a log file on a full disk costs one line of stderr, not a traceback per record.

Contracts: RFC 8259 section 9 ("An implementation may set limits on the maximum depth of
nesting"); Kubernetes readiness probes (a non-2xx answer takes the pod out of the service);
sqlite.org "Database File Format" (an empty file is a valid, empty database: SQLite would start
afresh in it, which is why Hermes must refuse it); `/dev/full` answers every write with ENOSPC.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import structlog

import run_agent
from agent.logging_setup import configure_logging, shutdown_logging
from gateway.http import HttpApiServer
from gateway.http.guards import MAX_JSON_DEPTH
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM
from tests.gateway.harness import make_config, start_runtime

KEY = "sk-hermes-test"


@pytest.fixture
async def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[HttpApiServer, FakeLLM]]:
    llm = FakeLLM()
    await llm.__aenter__()
    model = {"provider": "custom", "base_url": llm.openai_base_url}
    config = make_config(llm, tmp_path / "state.db", model=model)
    async with start_runtime(config, tmp_path, monkeypatch) as runtime:
        runner = GatewayRunner(runtime)
        server = HttpApiServer(runner, host="127.0.0.1", port=0, api_key=KEY)
        await server.start()
        try:
            yield server, llm
        finally:
            await server.stop()
            await runner.stop()
            await llm.__aexit__(None, None, None)


async def _post(server: HttpApiServer, path: str, body: str) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:
        url = f"http://127.0.0.1:{server.port}{path}"
        async with session.post(url, data=body, headers=headers) as response:
            return response.status, await response.json()


async def _ready(server: HttpApiServer) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{server.port}/ready") as response:
            return response.status, await response.json()


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
@pytest.mark.parametrize("depth", [10_000, MAX_JSON_DEPTH + 1])
async def test_deeply_nested_json_is_a_400(
    served: tuple[HttpApiServer, FakeLLM], path: str, depth: int
) -> None:
    """`[[[[...]]]]` 10,000 deep (Python's parser would raise RecursionError), or just past
    the limit: a 400 in the OpenAI envelope, and the server still answers the next request."""
    server, _ = served
    body = '{"model": "m", "messages": ' + "[" * depth + "]" * depth + "}"
    status, error = await _post(server, path, body)
    assert status == 400, error
    assert "nests deeper" in error["error"]["message"]
    status, _ = await _post(server, path, "not json at all")
    assert status == 400
    assert (await _ready(server))[0] == 200


async def test_ready_is_not_ready_while_the_model_endpoint_is_dead(
    served: tuple[HttpApiServer, FakeLLM],
) -> None:
    """Ready with the model server up; 503 naming the model endpoint once it stops."""
    server, llm = served
    status, body = await _ready(server)
    assert status == 200, body
    await llm.__aexit__(None, None, None)
    server.readiness._probed = None  # the next poll probes again (no waiting out the cache)
    status, body = await _ready(server)
    assert status == 503 and "model endpoint" in body["reason"]


async def test_ready_is_not_ready_while_the_disk_is_full(
    served: tuple[HttpApiServer, FakeLLM], tmp_path: Path
) -> None:
    """When the store's disk has less room than a turn needs, `/ready` says so."""
    server, _ = served
    free = shutil.disk_usage(tmp_path).free
    server.readiness._min_free_bytes = free + 1024**3  # this disk, judged by a stricter need
    status, body = await _ready(server)
    assert status == 503 and "disk" in body["reason"]


def test_an_empty_state_db_is_refused_with_a_sentence(
    hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 0-byte state.db (a failed copy): `chat -q` exits 1 with one sentence saying what to
    do, and the file is left as it was (not silently re-initialised as a new database)."""
    (hermes_home / "config.yaml").write_text(
        "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\n"
        "  context_length: 8000\n"
    )
    db = hermes_home / "state.db"
    db.write_bytes(b"")
    code = run_agent.main(["chat", "-q", "hello"])
    err = capsys.readouterr().err
    assert code == 1
    assert "is an empty file (0 bytes)" in err and "Restore it from a backup" in err
    assert "Traceback" not in err
    assert db.stat().st_size == 0


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_log_file_on_a_full_disk_costs_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """agent.log on a full disk (/dev/full: every write is ENOSPC): 19 warnings make one line
    on stderr, no "--- Logging error ---" tracebacks."""
    (tmp_path / "agent.log").symlink_to("/dev/full")
    configure_logging(log_dir=tmp_path, level="info", console=False)
    try:
        log = structlog.get_logger("hermes.test")
        for n in range(19):
            log.warning("store_write_failed", attempt=n)
        logging.getLogger("hermes.stdlib").warning("and one from the standard library")
    finally:
        shutdown_logging()
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Logging error" not in err
    assert err.count("cannot write") == 1, err
