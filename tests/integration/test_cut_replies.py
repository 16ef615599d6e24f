"""A cut reply is never a finished one: `chat -q` and the HTTP API against a model that cuts
its stream or answers a body that is not a response (issue 33).

Contracts: OpenAI API reference, "The chat completion object": `choices[].finish_reason` is
required, and a streamed completion ends with a chunk carrying it (then `data: [DONE]`);
Anthropic Messages streaming: `message_delta` carries `stop_reason` before `message_stop`. A
stream that ends without them, or a 200 whose body is not a completion, is a provider failure:
retried once, then the turn fails (HTTP 502, a non-zero exit) keeping what arrived under a
failure mark, never stored as the answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from gateway.http import SESSION_HEADER, HttpApiServer
from gateway.run import GatewayRunner
from sim.llm_server import FakeLLM, Turn
from tests.gateway.harness import make_config, start_runtime
from tests.integration.test_chat_cli import chat, write_config

KEY = "sk-hermes-test"
CUT = Turn(text="the first half of a long answer that never ends", cut_after_events=3)
"""Cut after text went out (OpenAI: the role chunk and two words)."""
CUT_EARLY = Turn(text="the first half of a long answer that never ends", cut_after_events=1)
"""Cut before any text: OpenAI's first chunk carries only the role, Anthropic's `message_start`."""
HTML = Turn(raw_body="<html><body>502 Bad Gateway</body></html>")
BROKEN_JSON = Turn(
    raw_body='{"id": "chatcmpl-1", "choices": [{"mess', raw_content_type="application/json"
)


@pytest.mark.parametrize("route", ["custom", "anthropic"])
def test_chat_q_cut_twice_exits_non_zero_and_stores_a_marked_partial(
    route: str, threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stream cut before any text, twice (max_retries is 2): one retry, no more; exit 1; the
    resume id still printed; the next turn's request tells the model that turn failed."""
    write_config(hermes_home, threaded_llm, route)
    threaded_llm.script(CUT_EARLY, CUT_EARLY, CUT_EARLY)
    code, out, err = chat(capsys, "-q", "tell me everything")
    assert code == 1, err
    assert "ReplyCut" in err and "Traceback" not in err
    assert len(threaded_llm.requests) == 2  # the first try and one retry, no more
    hints = [line for line in err.splitlines() if line.startswith("resume with: ")]
    assert len(hints) == 1
    session_id = hints[0].rsplit(" ", 1)[1]
    threaded_llm.script(Turn(text="fine now"))
    code, _, err = chat(capsys, "-q", "again?", "--resume", session_id)
    assert code == 0, err
    body = threaded_llm.requests[-1].json or {}
    wire = json.dumps(body.get("messages"))
    assert "this turn failed (ReplyCut)" in wire  # the model is told the truth next turn


def test_chat_q_cut_once_is_retried_and_answers(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One cut stream before any text reached the user, then a whole one: exit 0, one answer."""
    write_config(hermes_home, threaded_llm, "custom")
    threaded_llm.script(CUT_EARLY, Turn(text="the whole answer"))
    code, out, err = chat(capsys, "-q", "hi")
    assert code == 0, err
    assert out == "the whole answer\n"
    assert len(threaded_llm.requests) == 2


def test_chat_q_cut_after_text_is_not_retried_and_keeps_the_partial(
    threaded_llm: FakeLLM, hermes_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cut after words were printed: no retry (the user would read them twice), exit 1, and
    the store keeps those words followed by the failure mark, not as a finished answer."""
    write_config(hermes_home, threaded_llm, "custom")
    threaded_llm.script(CUT)
    code, out, err = chat(capsys, "-q", "hi")
    assert code == 1 and out.startswith("the first")
    assert len(threaded_llm.requests) == 1
    session_id = next(
        line.rsplit(" ", 1)[1] for line in err.splitlines() if line.startswith("resume with: ")
    )
    threaded_llm.script(Turn(text="fine now"))
    code, _, err = chat(capsys, "-q", "again?", "--resume", session_id)
    assert code == 0, err
    messages = (threaded_llm.requests[-1].json or {}).get("messages") or []
    answers = [m["content"] for m in messages if m.get("role") == "assistant"]
    assert answers == ["the first\n\n[no reply: this turn failed (ReplyCut)]"]


@dataclass(slots=True)
class Api:
    client: openai.AsyncOpenAI
    llm: FakeLLM
    runtime: object


@pytest.fixture
async def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    async with FakeLLM() as llm:
        model = {"provider": "custom", "base_url": llm.openai_base_url, "max_retries": 2}
        config = make_config(llm, tmp_path / "state.db", model=model)
        async with start_runtime(config, tmp_path, monkeypatch) as runtime:
            runner = GatewayRunner(runtime)
            server = HttpApiServer(runner, host="127.0.0.1", port=0, api_key=KEY)
            await server.start()
            client = openai.AsyncOpenAI(
                api_key=KEY, base_url=f"http://127.0.0.1:{server.port}/v1", max_retries=0
            )
            try:
                yield Api(client=client, llm=llm, runtime=runtime)
            finally:
                await client.close()
                await server.stop()
                await runner.stop()


async def _assistant_rows(api: Api, session_id: str) -> list[str]:
    store = api.runtime.store  # type: ignore[attr-defined]
    rows = await store.transcript.load_active(session_id)
    return [str(m.get("content") or "") for m in rows if m.get("role") == "assistant"]


@pytest.mark.parametrize("bad", [HTML, BROKEN_JSON], ids=["html", "broken_json"])
async def test_http_answers_502_and_stores_no_answer(api: Api, bad: Turn) -> None:
    """Twice the same bad reply: 502 from the API (not a 200 with `finish_reason: stop`), one
    retry, and the store holds a failure mark, not the fragment as a finished answer."""
    api.llm.script(bad, bad)
    with pytest.raises(openai.APIStatusError) as caught:
        await api.client.chat.completions.with_raw_response.create(
            model="test-model", messages=[{"role": "user", "content": "hello"}]
        )
    assert caught.value.status_code == 502
    assert len(api.llm.requests) == 2
    session_id = caught.value.response.headers.get(SESSION_HEADER)
    if session_id:
        answers = await _assistant_rows(api, session_id)
        assert answers and all("this turn failed" in a for a in answers)


async def test_http_stream_cut_ends_with_an_error_not_stop(api: Api) -> None:
    """A streamed client whose model stream is cut after text reached it: no chunk says
    `finish_reason: stop`; the stream ends with an error event; no retry (it would repeat the
    text the client already has)."""
    api.llm.script(CUT, CUT)
    finishes: list[str | None] = []
    with pytest.raises(openai.APIError):
        stream = await api.client.chat.completions.create(
            model="test-model", messages=[{"role": "user", "content": "hello"}], stream=True
        )
        async for chunk in stream:
            finishes += [c.finish_reason for c in chunk.choices]
    assert "stop" not in finishes
    assert len(api.llm.requests) == 1
