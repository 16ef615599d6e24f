"""The floor gateway of `bench_gateway.py --cpu-per-turn`: the least an HTTP chat gateway can do.

aiohttp and `AsyncOpenAI.chat.completions.create`, no store: each session's history is a list in
a dict. The client-visible API is ours for one chat turn: POST /v1/chat/completions with a bearer
key and the turn's messages; the session in `X-Hermes-Session-Id`, answered on every reply; the
reply is the model's completion. The SDK client is the one ours uses (`DefaultAioHttpClient`).

`transform=False` posts the same body through the client's low-level `post`, as our providers do
(without the SDK's per-request walk of every message): the floor of that path.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import openai
from aiohttp import web

SESSION_HEADER = "X-Hermes-Session-Id"


async def serve(*, llm_url: str, port: int, key: str, model: str, transform: bool = True) -> None:
    """Serve on 127.0.0.1:`port` until cancelled."""
    client = openai.AsyncOpenAI(
        api_key="sk-floor", base_url=llm_url, http_client=openai.DefaultAioHttpClient()
    )
    histories: dict[str, list[Any]] = {}

    async def chat(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {key}":
            return web.json_response({"error": {"message": "unknown key"}}, status=401)
        body = await request.json()
        session = request.headers.get(SESSION_HEADER) or uuid.uuid4().hex
        history = histories.setdefault(session, [])
        history.extend(body["messages"])
        request = {"model": body.get("model") or model, "messages": history}
        if transform:
            completion = await client.chat.completions.create(**request)
        else:
            completion = await client.post(
                "/chat/completions", body=request, cast_to=openai.types.chat.ChatCompletion
            )
        history.append({"role": "assistant", "content": completion.choices[0].message.content})
        reply = completion.model_dump(mode="json")
        return web.json_response(reply, headers={SESSION_HEADER: session})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        await client.close()
