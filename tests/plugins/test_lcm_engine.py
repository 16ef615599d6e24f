"""The `lcm` engine: selected only by name, a hierarchy of cited summaries, its two tools."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from agent.archive.anchors import split_index
from agent.compaction.markers import is_marker, parse_summary_marker
from agent.config import parse_config
from agent.context_compressor import ContextCompressor
from agent.context_engine import ContextEngine
from agent.engine_resolution import available_context_engines, load_context_engine
from agent.errors import CompactionRefused, ConfigError, ProviderUnavailable
from agent.prepared_compaction import SpeculativeCompaction
from agent.providers.base import ProviderReply, ProviderRequest, Usage
from agent.tokens import estimate_messages_tokens_rough
from agent.tools.registry import ToolContext
from plugins.context_engine.lcm import LcmEngine
from plugins.context_engine.lcm.hierarchy import FANOUT, parse_nodes
from plugins.context_engine.truncate import TruncateEngine
from tests.agent.scripted import agent_on_store, tool_call
from tests.fakes.provider import FakeProvider, make_reply

CONFIG = parse_config({"context": {"engine": "lcm"}, "model": {"context_length": 24_000}})


def _summaries(request: ProviderRequest) -> str:
    """A summarizer that cites nothing, for leaves and condensations alike."""
    text = str(request.messages[-1]["content"])
    return "## Goal\ncondensed" if "Condense the summaries" in text else "## Goal\na leaf"


def _engine(summarizer: FakeProvider | None = None) -> ContextEngine:
    provider = summarizer or FakeProvider(responder=_summaries)
    return load_context_engine(CONFIG, summarizer=provider, summary_model="aux")


# -- selection ----------------------------------------------------------------------------------


def test_lcm_is_never_chosen_by_default() -> None:
    """Without `context.engine: lcm` the built-in engine runs; lcm is listed as available."""
    default = load_context_engine(parse_config({}), summarizer=FakeProvider(), summary_model="a")
    assert isinstance(default, ContextCompressor)
    assert "lcm" in available_context_engines()
    engine = _engine()
    assert isinstance(engine, LcmEngine) and engine.name == "lcm"
    assert engine.status().tail_token_budget is None  # micro-compaction keeps out of its way


def test_the_plugin_folder_wins_over_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A registered factory named lcm does not shadow the plugin folder's engine."""
    monkeypatch.setattr("agent.context_engine._REGISTRY", {})
    from agent.context_engine import register_context_engine

    register_context_engine("lcm", lambda config, **deps: TruncateEngine(config.compression))
    assert isinstance(_engine(), LcmEngine)


def test_the_registry_serves_when_no_plugin_folder_has_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With no lcm folder, a registered lcm is used; with neither, the error lists the names."""
    monkeypatch.setattr("agent.context_engine._REGISTRY", {})
    from agent.context_engine import register_context_engine

    with pytest.raises(ConfigError, match="unknown context engine 'lcm'; available engines"):
        load_context_engine(
            CONFIG, summarizer=FakeProvider(), summary_model="a", plugins_dir=tmp_path
        )
    register_context_engine("lcm", lambda config, **deps: TruncateEngine(config.compression))
    engine = load_context_engine(
        CONFIG, summarizer=FakeProvider(), summary_model="a", plugins_dir=tmp_path
    )
    assert isinstance(engine, TruncateEngine)


# -- compaction through the loop ----------------------------------------------------------------


def _reply(request: ProviderRequest) -> ProviderReply:
    """A long answer whose usage reports the prompt's real size (as a provider would)."""
    prompt = estimate_messages_tokens_rough(request.messages)
    return make_reply("ok " + "y" * 6_000, usage=Usage(input_tokens=prompt, output_tokens=1_500))


async def _long_session(tmp_path: Path, turns: int, summarizer: FakeProvider | None = None):  # type: ignore[no-untyped-def]
    provider = FakeProvider(responder=_reply)
    agent, store = await agent_on_store(
        tmp_path, provider, lambda: _engine(summarizer), context_length=24_000
    )
    for n in range(turns):
        await agent.run_turn(f"step {n}: remember code KESTREL-{n} " + "z" * 2_000)
    return agent, store, provider


async def test_a_hierarchy_of_cited_summaries_covers_every_archived_row(tmp_path: Path) -> None:
    """Many passes leave one marker whose nodes have levels, condensed ones included, and whose
    anchors cover every row the passes archived."""
    agent, store, _ = await _long_session(tmp_path, 40)
    try:
        info = await store.sessions.get_session(agent.session_id)
        assert info is not None and info.compactions > FANOUT
        markers = [m for m in agent.transcript if is_marker(m)]
        assert len(markers) == 1
        text = parse_summary_marker(markers[0]) or ""
        nodes = parse_nodes(text)
        assert max(n.level for n in nodes) >= 1 and nodes[-1].level == 0
        assert [n.level for n in nodes] == sorted((n.level for n in nodes), reverse=True)
        anchors = [a for n in nodes for a in n.anchors]
        assert split_index(text)[1]  # the index line `recall` reads
        rows = await store.transcript.show(agent.session_id, include_archived=True)
        carried = {m["_id"] for m in agent.transcript}
        lost = [
            r["_id"]
            for r in rows
            if r.get("_active") is False
            and r["role"] != "system"
            and r.get("_kind") != "summary"
            and r["_id"] not in carried
            and not any(a.first <= r["_id"] <= a.last for a in anchors)
        ]
        assert lost == []
        assert agent.engine.status().details["summary_nodes"] == len(nodes)
    finally:
        await store.aclose()


async def test_lcm_is_prepared_in_the_background_and_no_turn_waits_for_it(
    tmp_path: Path,
) -> None:
    """With speculation on (the default), every lcm pass is prepared after a reply and swapped
    in at a turn boundary: no summary call happens inside a turn, and the engine counts a pass
    only once it is adopted (issue 14: blocking compaction is left for a request that would
    not fit at all; the 500-turn replay had 18 blocking lcm passes before this)."""
    in_turn = False
    called_in_turn: list[str] = []

    def summaries(request: ProviderRequest) -> ProviderReply:
        if in_turn:
            called_in_turn.append(str(request.messages[-1]["content"])[:40])
        return make_reply(_summaries(request))

    # Six protected messages: with the default twenty, a 24K window has no middle to prepare
    # before the request would not fit.
    config = parse_config(
        {"context": {"engine": "lcm"}, "compression": {"protect_last_n": 6}},
    )
    summarizer = FakeProvider(responder=summaries)
    agent, store = await agent_on_store(
        tmp_path,
        FakeProvider(responder=_reply),
        lambda: load_context_engine(config, summarizer=summarizer, summary_model="aux"),
        config=config,
        end_of_turn=(SpeculativeCompaction(config.compression),),
        context_length=24_000,
    )
    try:
        assert agent.engine.prepares_ahead
        for n in range(30):
            in_turn = True
            await agent.run_turn(f"step {n}: remember code KESTREL-{n} " + "z" * 2_000)
            in_turn = False
            await agent.finalize_turn()
            await agent.wait_background()
            await agent.proposals.adopt_ready()
        info = await store.sessions.get_session(agent.session_id)
        assert info is not None and info.compactions >= 3
        assert called_in_turn == []
        assert agent.engine.status().compactions == info.compactions
        assert agent.engine.current_tokens(agent.transcript) < agent.engine.threshold_tokens
    finally:
        await store.aclose()


async def test_lcm_grep_and_expand_through_the_loop(tmp_path: Path) -> None:
    """The model greps the whole archive (oldest first) and expands a node's anchor to rows."""
    agent, store, provider = await _long_session(tmp_path, 12)
    try:
        offered = {s.name for s in provider.requests[-1].tools}
        assert {"lcm_grep", "lcm_expand"} <= offered
        provider.script(tool_call("lcm_grep", pattern=r"KESTREL-\d+\b", context=0), "found")
        await agent.run_turn("which codes did I give?")
        result = str(provider.requests[-1].messages[-1]["content"])
        assert result.startswith(r"lcm_grep /KESTREL-\d+\b/, page 1: 10 matching row(s)")
        codes = re.findall(r"remember code (KESTREL-\d+)", result)
        assert codes[:3] == ["KESTREL-0", "KESTREL-1", "KESTREL-2"] and "(archived)" in result
        assert '"page": 2' in result
        marker = next(m for m in agent.transcript if is_marker(m))
        first = parse_nodes(parse_summary_marker(marker) or "")[0].anchors[0]
        provider.script(tool_call("lcm_expand", "call_2", anchor=str(first)), "read")
        await agent.run_turn("show me the start")
        expanded = str(provider.requests[-1].messages[-1]["content"])
        assert expanded.startswith(f"lcm_expand {first}, page 1:")
        assert f"#{first.first} " in expanded
    finally:
        await store.aclose()


async def test_hostile_patterns_are_bounded(tmp_path: Path) -> None:
    """An invalid pattern is explained; a catastrophic one stops quickly with a note."""
    agent, store, _ = await _long_session(tmp_path, 1)
    try:
        await store.transcript.append(
            agent.session_id, [{"role": "user", "content": "a" * 50_000 + "!"}]
        )
        ctx = ToolContext(session_id=agent.session_id, services={"store": store})

        async def grep(pattern: str) -> str:
            args = json.dumps({"pattern": pattern})
            call = {
                "id": "g",
                "type": "function",
                "function": {"name": "lcm_grep", "arguments": args},
            }
            return await agent.tools.run(call, ctx)  # type: ignore[arg-type]

        assert (await grep("a(b")).startswith(
            "Error: the pattern is not a valid regular expression"
        )
        assert (await grep("")).startswith("Error: lcm_grep needs a non-empty 'pattern'")
        started = time.monotonic()
        slow = await grep(r"(a|aa)+$")
        assert time.monotonic() - started < 5 and "took too long" in slow
    finally:
        await store.aclose()


async def test_summary_failures_follow_the_policy(tmp_path: Path) -> None:
    """An overloaded summarizer refuses the pass (transcript untouched); another error gives a
    deterministic local leaf that still cites its rows."""
    overloaded = FakeProvider(
        responder=lambda r: (_ for _ in ()).throw(ProviderUnavailable("x", "m"))
    )
    agent, store, _ = await _long_session(tmp_path, 14, summarizer=overloaded)
    try:
        before = list(agent.transcript)
        with pytest.raises(CompactionRefused, match="ProviderUnavailable"):
            await agent.compress(reason="manual")
        assert agent.transcript == before
        broken = FakeProvider(responder=lambda r: (_ for _ in ()).throw(ValueError("bad reply")))
        agent.use_engine(_engine(broken))
        result = await agent.compress(reason="manual")
        assert result.outcome == "local_summary"
        text = parse_summary_marker(next(m for m in agent.transcript if is_marker(m))) or ""
        assert "Built without the summary model (ValueError)" in text and split_index(text)[1]
    finally:
        await store.aclose()
