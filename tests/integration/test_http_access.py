"""Who may do what over HTTP, and what is open without a key (issue 12): named keys with roles
and tools, `/health` and `/ready`, CORS, and model routing.

Contracts: the Fetch standard's CORS protocol (a preflight is an OPTIONS request carrying
`Access-Control-Request-Method`, sent without credentials; it is answered with
`Access-Control-Allow-Origin/-Methods/-Headers`); OpenAI API reference, "Models" (`GET
/v1/models`, `GET /v1/models/{model}`, the model object) and "Chat Completions" (`model`).
"""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from agent.errors import ConfigError
from gateway.http import SESSION_HEADER, HttpApiServer
from sim.llm_server import ToolCallSpec, Turn
from tests.gateway.harness import MODEL
from tests.integration.http_api import KEY, Served, serve

USER_KEY = "sk-user-alice"
OPS_KEY = "sk-admin-ops"
HI = [{"role": "user", "content": "hi"}]


def _keys(**extra: object) -> dict[str, object]:
    return {
        "http": {
            "keys": [
                {"name": "alice", "key_env": "ALICE_KEY", "role": "user"},
                {"name": "ops", "key": OPS_KEY, "role": "admin", "tools": ["terminal"]},
            ],
            **extra,
        }
    }


@pytest.fixture
async def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Served:  # type: ignore[misc]
    async with serve(
        tmp_path,
        monkeypatch,
        environ={"ALICE_KEY": USER_KEY},
        tools={"enabled": ["terminal", "read_file"], "approval": "allow"},
        gateway=_keys(cors_origins=["https://chat.example.com"]),
    ) as served:
        yield served


def _tool_names(api: Served) -> set[str]:
    body = api.llm.requests[-1].json or {}
    return {tool["name"] for tool in body.get("tools", [])}


async def test_a_user_key_cannot_switch_the_model(api: Served) -> None:
    """`/model gpt-4o` by a user-role key is refused; an admin key may."""
    alice = api.client(USER_KEY)
    refused = await alice.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "/model gpt-4o"}]
    )
    await alice.close()
    assert refused.choices[0].message.content == "Only an admin can switch the model."
    ops = api.client(OPS_KEY)
    switched = await ops.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "/model gpt-4o"}]
    )
    await ops.close()
    assert "gpt-4o" in (switched.choices[0].message.content or "")
    assert api.llm.requests == []


async def test_a_user_key_has_no_terminal_and_cannot_run_it(api: Served, tmp_path: Path) -> None:
    """A user-role key without a grant: the terminal is not offered to the model, and a call
    to it anyway is refused (the command never runs); the admin key granted it gets it."""
    marker = tmp_path / "ran"
    call = ToolCallSpec(name="terminal", arguments=f'{{"command": "touch {marker}"}}')
    api.llm.script(Turn(tool_calls=[call]), Turn(text="done"))
    alice = api.client(USER_KEY)
    await alice.chat.completions.create(model=MODEL, messages=HI)
    await alice.close()
    first, second = api.llm.requests[-2:]
    assert "terminal" not in {t["name"] for t in (first.json or {}).get("tools", [])}
    assert "read_file" in {t["name"] for t in (first.json or {}).get("tools", [])}
    assert "is not available to" in str((second.json or {})["messages"])
    assert not marker.exists()
    ops = api.client(OPS_KEY)
    await ops.chat.completions.create(model=MODEL, messages=HI)
    await ops.close()
    assert _tool_names(api) == {"terminal"}


async def test_the_single_api_key_stays_an_admin_key_named_default(api: Served) -> None:
    """`api_key` (here next to named keys) keeps working, as an admin."""
    client = api.client(KEY)
    reply = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "/model gpt-4o"}]
    )
    await client.close()
    assert "Only an admin" not in (reply.choices[0].message.content or "")


async def test_a_key_env_that_is_not_set_is_a_config_error_naming_the_key(api: Served) -> None:
    with pytest.raises(ConfigError, match="ALICE_KEY is not set") as caught:
        HttpApiServer(api.runner, host="127.0.0.1", port=0, api_key=None, environ={})
    assert caught.value.key == "gateway.http.keys.0.key_env"


async def test_health_and_ready_answer_without_a_key(api: Served) -> None:
    async with api.http.get(f"{api.base}/health") as response:
        assert (response.status, await response.json()) == (200, {"status": "ok"})
    async with api.http.get(f"{api.base}/ready") as response:
        assert response.status == 200
        assert (await response.json())["status"] == "ready"
    async with api.http.get(f"{api.base}/v1/models") as response:
        assert response.status == 401


async def test_ready_is_503_when_the_store_does_not_answer(api: Served) -> None:
    await api.runner.store.aclose()
    async with api.http.get(f"{api.base}/ready") as response:
        assert response.status == 503
        assert (await response.json())["reason"] == "the session store is not answering"


async def test_cors_preflight_needs_no_key_and_names_what_is_allowed(api: Served) -> None:
    origin = "https://chat.example.com"
    preflight = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    url = f"{api.base}/v1/chat/completions"
    async with api.http.options(url, headers=preflight) as response:
        assert response.status == 204
        assert response.headers["Access-Control-Allow-Origin"] == origin
        assert "POST" in response.headers["Access-Control-Allow-Methods"]
        allowed = response.headers["Access-Control-Allow-Headers"].lower()
        for header in ("authorization", "content-type", SESSION_HEADER.lower()):
            assert header in allowed
    headers = {"Origin": origin, **api.auth()}
    async with api.http.post(url, json={"model": MODEL, "messages": HI}, headers=headers) as ok:
        assert ok.status == 200
        assert ok.headers["Access-Control-Allow-Origin"] == origin
        assert SESSION_HEADER in ok.headers["Access-Control-Expose-Headers"]
    async with api.http.get(f"{api.base}/v1/models", headers={"Origin": origin}) as refused:
        assert refused.status == 401  # the browser can read why
        assert refused.headers["Access-Control-Allow-Origin"] == origin
    body = {"model": MODEL, "messages": HI, "stream": True}
    async with api.http.post(url, json=body, headers=headers) as streamed:
        assert streamed.headers["Content-Type"] == "text/event-stream"
        assert streamed.headers["Access-Control-Allow-Origin"] == origin
        assert SESSION_HEADER in streamed.headers["Access-Control-Expose-Headers"]
        await streamed.read()


async def test_an_origin_not_listed_gets_no_cors_headers(api: Served) -> None:
    preflight = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    url = f"{api.base}/v1/chat/completions"
    async with api.http.options(url, headers=preflight) as response:
        assert response.status != 204
        assert "Access-Control-Allow-Origin" not in response.headers


async def test_without_cors_origins_there_are_no_cors_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve(tmp_path, monkeypatch) as api:
        headers = {"Origin": "https://chat.example.com", **api.auth()}
        async with api.http.get(f"{api.base}/v1/models", headers=headers) as response:
            assert response.status == 200
            assert "Access-Control-Allow-Origin" not in response.headers


# -- model routing -------------------------------------------------------------------------


@pytest.fixture
async def routed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Served:  # type: ignore[misc]
    from sim.llm_server import FakeLLM

    async with FakeLLM() as llm:
        route = {
            "provider": "anthropic",
            "model": "fast-upstream",
            "base_url": llm.anthropic_base_url,
            "api_key_env": "FAST_KEY",
        }
        async with serve(
            tmp_path,
            monkeypatch,
            llm=llm,
            environ={"FAST_KEY": "fast-key"},
            gateway={"http": {"models": {"fast": route}}},
        ) as served:
            yield served


async def test_a_routed_model_really_answers_the_turn(routed: Served) -> None:
    """`model: fast` goes to fast's provider with fast's upstream model and key; the reply's
    `model` is the model that answered; the default model still answers by its name."""
    client = routed.client()
    fast = await client.chat.completions.create(model="fast", messages=HI)
    sent = routed.llm.requests[-1]
    default = await client.chat.completions.create(model=MODEL, messages=HI)
    await client.close()
    assert (sent.json or {})["model"] == "fast-upstream"
    assert sent.headers.get("authorization") == "Bearer fast-key"
    assert fast.model == "fast-upstream"
    assert (routed.llm.requests[-1].json or {})["model"] == MODEL
    assert default.model == MODEL


async def test_a_model_not_served_is_a_400_listing_the_served_names(routed: Served) -> None:
    client = routed.client()
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="gpt-4o", messages=HI)
    await client.close()
    assert caught.value.param == "model"
    assert f"{MODEL}, fast" in caught.value.message
    assert routed.llm.requests == []


async def test_models_lists_and_finds_every_served_name(routed: Served) -> None:
    client = routed.client()
    listed = await client.models.list()
    one = await client.models.retrieve("fast")
    with pytest.raises(openai.NotFoundError) as caught:
        await client.models.retrieve("gpt-4o")
    await client.close()
    assert [m.id for m in listed.data] == [MODEL, "fast"]
    assert (one.id, one.object) == ("fast", "model")
    assert caught.value.code == "model_not_found"


async def test_a_route_without_its_key_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = {"provider": "openai", "model": "gpt-4o-mini", "api_key_env": "NOPE_KEY"}
    with pytest.raises(ConfigError, match="NOPE_KEY"):
        async with serve(tmp_path, monkeypatch, gateway={"http": {"models": {"mini": route}}}):
            pass


async def test_pass_through_fields_are_checked_against_the_routed_models_wire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`temperature` cannot go over the default Anthropic route (a 400 naming it), but a model
    routed to an OpenAI-compatible server takes it, and the upstream request carries it."""
    from sim.llm_server import FakeLLM

    async with FakeLLM() as llm:
        route = {"provider": "custom", "model": "local-upstream", "base_url": llm.openai_base_url}
        async with serve(
            tmp_path, monkeypatch, llm=llm, gateway={"http": {"models": {"local": route}}}
        ) as api:
            client = api.client()
            with pytest.raises(openai.BadRequestError) as caught:
                await client.chat.completions.create(model=MODEL, messages=HI, temperature=0.5)
            answered = await client.chat.completions.create(
                model="local", messages=HI, temperature=0.5
            )
            await client.close()
    assert caught.value.param == "temperature"
    sent = llm.requests[-1].json or {}
    assert (sent["model"], sent["temperature"]) == ("local-upstream", 0.5)
    assert answered.model == "local-upstream"
