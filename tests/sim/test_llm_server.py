"""The sim server's additions to the fake: deliberate latency, time accounting, lean recording."""

from __future__ import annotations

import anthropic

from sim.llm_server import FakeLLM, Turn


def _client(fake: FakeLLM) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="k", base_url=fake.anthropic_base_url, max_retries=0, timeout=5
    )


async def test_latency_is_added_and_accounted_apart() -> None:
    """Each reply waits latency_s; busy time includes it and latency_total_s reports it alone."""
    async with FakeLLM(latency_s=0.05) as fake:
        fake.script(Turn(text="a"), Turn(text="b"))
        client = _client(fake)
        for _ in range(2):
            await client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        await client.close()
    assert fake.latency_total_s == 0.1
    assert fake.busy_s >= 0.1
    assert len(fake.usages) == 2 and fake.usages[0]["output_tokens"] >= 1


async def test_bodies_can_be_left_unrecorded() -> None:
    """With record_bodies off a request is still recorded, without its (large) JSON body."""
    async with FakeLLM(record_bodies=False) as fake:
        client = _client(fake)
        await client.messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "x" * 4000}]
        )
        await client.close()
    assert len(fake.requests) == 1 and fake.requests[0].json is None
    assert fake.usages[0]["input_tokens"] == 1000
