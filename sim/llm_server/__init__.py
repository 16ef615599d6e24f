"""The fake model server: Anthropic Messages, OpenAI Chat Completions and Responses on 127.0.0.1.

One aiohttp server (`FakeLLM`) speaks all three wire formats through one set of plumbing:
scripted turns (`fake.script(Turn(...))`), a `responder` hook for dynamic replies, or an echo of
the last user text; a request log with `wait_requests`; the real services' auth and error
envelopes; `retry-after-ms` on retryable errors; an injectable clock (`ManualClock`) for the
prompt-cache TTL. Token counts are ceil(chars / 4), so tests can assert exact numbers. It ships
with the product because `hermes demo` and the replay benchmark drive the real runtime against
it; the tests use it too.

Modules: `_server` (the aiohttp shell and the shared steps), `_http` (keys, bodies, envelopes,
JSON and SSE), `_prompt` (tokens and cache arithmetic), one module per wire (`_anthropic`,
`_openai_chat`, `_responses`), `_values` (what tests script and read), `_window` (a model
window with each real server's overflow error), `_redirect` (a Host-preserving httpx2 transport
for `http_client_for`).
"""

from __future__ import annotations

from sim.llm_server._prompt import tokens_of_text
from sim.llm_server._server import FakeLLM
from sim.llm_server._values import ManualClock, RecordedRequest, Responder, ToolCallSpec, Turn
from sim.llm_server._window import OverflowStyle

__all__ = [
    "FakeLLM",
    "ManualClock",
    "OverflowStyle",
    "RecordedRequest",
    "Responder",
    "ToolCallSpec",
    "Turn",
    "tokens_of_text",
]
