"""SDK clients and raw-request headers for the fake model server's own tests."""

from __future__ import annotations

import anthropic
import openai

from sim.llm_server import FakeLLM

ANTHROPIC_VERSION = {"anthropic-version": "2023-06-01"}
"""What every Anthropic SDK request carries; raw requests in these tests send it too."""


def anthropic_client(fake: FakeLLM, key: str = "k") -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key=key, base_url=fake.anthropic_base_url, max_retries=0, timeout=5
    )


def openai_client(fake: FakeLLM, key: str = "k") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key=key, base_url=fake.openai_base_url, max_retries=0, timeout=5)
