"""The ledger through the real turn loop: kept verbatim, re-shown after every compaction as
reference material in the system message, never summarized, replaced when the user changes it."""

from __future__ import annotations

from pathlib import Path

from agent.config import CompressionConfig
from agent.context_compressor import ContextCompressor
from agent.ledger.rules import LEDGER_START
from agent.messages import content_text
from agent.providers.base import ProviderRequest
from tests.agent.scripted import agent_on_store
from tests.fakes.provider import FakeProvider

RULE = "Please always use the existing retry helper, don't add a new one"


def _texts(request: ProviderRequest) -> str:
    return "\n".join(content_text(m) for m in request.messages)


async def test_a_standing_instruction_survives_compaction_verbatim(tmp_path: Path) -> None:
    """The summary paraphrases the rule; the system message still carries it word for word,
    the summarizer never saw the ledger, and no user turn was invented for it."""
    summarizer = FakeProvider(responder=lambda request: "## Constraints\n- Reuse a helper.")

    def engine() -> ContextCompressor:
        return ContextCompressor(
            CompressionConfig(protect_last_n=2), summarizer=summarizer, summary_model="aux"
        )

    provider = FakeProvider(responder=lambda request: "ok " + "x" * 40_000)
    agent, store = await agent_on_store(tmp_path, provider, engine)
    try:
        await agent.run_turn("hello there")
        await agent.run_turn(f"Fix the pool. {RULE}.")
        for n in range(4):
            await agent.run_turn(f"next step {n}")
        await agent.compress(reason="manual")
        summary_request = summarizer.requests[-1]
        assert RULE in _texts(summary_request) and LEDGER_START not in _texts(summary_request)
        assert not any(RULE in content_text(m) for m in agent.transcript[1:])
        system = content_text(agent.transcript[0])
        assert LEDGER_START in system and RULE in system
        assert not any(LEDGER_START in content_text(m) for m in agent.transcript[1:])
        stored = await store.transcript.load_active(agent.session_id)
        assert RULE in content_text(stored[0])
        await agent.run_turn("carry on")
        sent = provider.requests[-1].messages
        assert sent[0]["role"] == "system" and RULE in content_text(sent[0])
        await agent.compress(reason="manual")  # a second compaction shows it again, once
        assert content_text(agent.transcript[0]).count(RULE) == 1
    finally:
        await store.aclose()


async def test_a_later_instruction_supersedes_the_earlier_one(tmp_path: Path) -> None:
    """ "never use tabs" retires "always use tabs" (linked, kept on record) and the system
    message changes before the next model call."""
    provider = FakeProvider(responder=lambda request: "noted")

    def engine() -> ContextCompressor:
        return ContextCompressor(CompressionConfig(), summarizer=FakeProvider(), summary_model="a")

    agent, store = await agent_on_store(tmp_path, provider, engine)
    try:
        await agent.run_turn("Always use tabs for indentation.")
        first = agent.transcript[-2]
        await agent.run_turn("Actually: never use tabs for indentation.")
        history = await store.ledger.list_instructions(agent.session_id, include_inactive=True)
        assert [(i.text, i.status) for i in history] == [
            ("Always use tabs for indentation", "superseded"),
            ("Actually: never use tabs for indentation", "active"),
        ]
        assert history[1].supersedes_id == history[0].id
        assert history[0].source_message_id == first["_id"]
        system = content_text(provider.requests[-1].messages[0])
        assert "never use tabs" in system and "Always use tabs" not in system
        assert [e.text for e in (await agent.instructions.ledger()).entries] == [history[1].text]
    finally:
        await store.aclose()


async def test_pin_and_unpin_show_at_once(tmp_path: Path) -> None:
    """A pin is in the very next request; unpinning takes it out again; both are stored."""
    provider = FakeProvider(responder=lambda request: "fine")

    def engine() -> ContextCompressor:
        return ContextCompressor(CompressionConfig(), summarizer=FakeProvider(), summary_model="a")

    agent, store = await agent_on_store(tmp_path, provider, engine)
    try:
        await agent.run_turn("hi")
        change = await agent.instructions.pin("answer in British English")
        assert [e.text for e in change.added] == ["answer in British English"]
        await agent.run_turn("colour or color?")
        assert "(pinned) answer in British English" in content_text(
            provider.requests[-1].messages[0]
        )
        assert (await agent.instructions.pin("answer in British English")).repeated
        removed = await agent.instructions.unpin(1)
        assert removed is not None and await agent.instructions.unpin(1) is None
        await agent.run_turn("and now?")
        assert LEDGER_START not in content_text(provider.requests[-1].messages[0])
        assert [
            i.status
            for i in await store.ledger.list_instructions(agent.session_id, include_inactive=True)
        ] == ["removed"]
        assert (await agent.instructions.pin("   ")).refused and (
            await agent.instructions.pin("x" * 10_000)
        ).refused
    finally:
        await store.aclose()


async def test_a_key_in_an_instruction_is_redacted_in_the_ledger(tmp_path: Path) -> None:
    """The ledger is a copy, like a summary: a credential in the instruction is not repeated."""
    provider = FakeProvider(responder=lambda request: "ok")

    def engine() -> ContextCompressor:
        return ContextCompressor(CompressionConfig(), summarizer=FakeProvider(), summary_model="a")

    agent, store = await agent_on_store(tmp_path, provider, engine)
    try:
        await agent.run_turn("Never paste the token sk-live1234567890abcdef into logs.")
        (entry,) = (await agent.instructions.ledger()).entries
        assert "live1234567890abcdef" not in entry.text and "[REDACTED]" in entry.text
        assert entry.text.startswith("Never paste the token") and entry.text.endswith("into logs")
    finally:
        await store.aclose()
