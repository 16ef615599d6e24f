"""The scripted model: plays each turn's plan in order and writes summaries that fit."""

from __future__ import annotations

from typing import Any

import pytest

from agent.compaction.micro_prompt import build_defrag_request, build_fold_request
from agent.compaction.summary_prompt import build_summary_request
from agent.messages import assistant_message, tool_message, user_message
from agent.providers.base import ProviderRequest
from sim.conversation import generate_conversation
from sim.llm_server import tokens_of_text
from sim.model import SimModel, is_summary_request, plan_summary_tokens, write_summary

_TOOL = {"name": "read_file", "description": "d", "input_schema": {"type": "object"}}


def _wire(request: ProviderRequest) -> dict[str, Any]:
    """The Anthropic body a summarizer request becomes (system split out, no tools)."""
    system, *rest = request.messages
    return {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": [{"type": "text", "text": system["content"]}],
        "messages": [{"role": m["role"], "content": m["content"]} for m in rest],
    }


def _exchange() -> list[Any]:
    call = {"id": "t1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    return [
        assistant_message("Let me read it.", [call]),
        tool_message("t1", "read_file", "src/hermes_net/retry.py\n" + "x = 1\n" * 800),
    ]


@pytest.mark.parametrize(
    ("request_", "summary"),
    [
        (build_summary_request(_exchange(), model="m", budget_tokens=2000), True),
        (
            build_fold_request(_exchange(), summary="## Goal\nold", model="m", budget_tokens=2000),
            True,
        ),
        (
            build_defrag_request(
                _exchange(), summary="## Goal\nold", model="m", budget_tokens=1000
            ),
            True,
        ),
        (ProviderRequest(model="m", messages=[user_message("hi (HRM-1000)")]), False),
    ],
)
def test_recognises_the_runtime_summary_prompts(request_: ProviderRequest, summary: bool) -> None:
    """The compressor's, the micro fold's and the defrag prompts are summary requests; chat is not."""
    assert is_summary_request(_wire(request_)) is summary


def test_a_request_with_tools_is_never_a_summary() -> None:
    """The agent's own calls offer tools, so they are played from the script."""
    body = _wire(build_summary_request(_exchange(), model="m", budget_tokens=2000))
    assert not is_summary_request({**body, "tools": [_TOOL]})


@pytest.mark.parametrize(
    ("previous", "new", "max_tokens", "condense", "budget", "expected"),
    [
        (0, 10_000, 8000, False, None, 1150),
        (2000, 1000, 8000, False, None, 2090),
        (2000, 1000, 8000, True, None, 1300),
        (0, 1_000_000, 8000, False, None, 6800),
        (5000, 5000, 8000, False, 2000, 2100),
    ],
)
def test_summary_size_follows_input_within_budget(
    previous: int, new: int, max_tokens: int, condense: bool, budget: int | None, expected: int
) -> None:
    """Carry most of the old summary, a tenth of the new material, and stay within the budget."""
    got = plan_summary_tokens(
        previous_tokens=previous,
        new_tokens=new,
        max_tokens=max_tokens,
        condense=condense,
        budget_tokens=budget,
    )
    assert got == expected


def test_defrag_summary_is_shorter_than_a_fold_of_the_same_summary() -> None:
    """A defrag request condenses; a fold of the same material keeps more."""
    old = write_summary("src/a.py " * 4000, max_tokens=20_000)
    fold = _wire(build_fold_request(_exchange(), summary=old, model="m", budget_tokens=4000))
    defrag = _wire(build_defrag_request(_exchange(), summary=old, model="m", budget_tokens=4000))
    model = SimModel(())
    folded, condensed = model(fold, "anthropic").text, model(defrag, "anthropic").text
    assert tokens_of_text(condensed) < tokens_of_text(folded)
    assert folded.startswith("## Goal") and "## Relevant Files" in folded
    assert model.calls == ["summary", "summary"]


def test_summary_always_fits_max_tokens() -> None:
    """However large the input, the summary stays under the request's max_tokens."""
    text = write_summary("tests/test_pool.py 3 passed, 1 failed\n" * 50_000, max_tokens=1000)
    assert tokens_of_text(text) <= 1000


def test_plays_a_turn_round_by_round_then_answers() -> None:
    """Each round of tool results moves the script on; after the last round comes the reply."""
    turn = next(t for t in generate_conversation(seed=7, turns=40) if len(t.steps) >= 2)
    model = SimModel(generate_conversation(seed=7, turns=40))
    messages: list[dict[str, Any]] = [{"role": "user", "content": turn.user_text}]
    for step in turn.steps:
        reply = model({"model": "m", "tools": [_TOOL], "messages": messages}, "anthropic")
        assert [c.name for c in reply.tool_calls] == [c.name for c in step]
        uses = [
            {"type": "tool_use", "id": f"u{i}", "name": c.name, "input": {}}
            for i, c in enumerate(step)
        ]
        results = [
            {"type": "tool_result", "tool_use_id": f"u{i}", "content": "HRM-1001"}
            for i in range(len(step))
        ]
        messages += [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    final = model({"model": "m", "tools": [_TOOL], "messages": messages}, "anthropic")
    assert final.text == turn.reply_text and not final.tool_calls


def test_openai_wire_counts_tool_messages() -> None:
    """On the OpenAI wire the tool results are `tool` messages."""
    turns = generate_conversation(seed=7, turns=40)
    turn = next(t for t in turns if len(t.steps) == 1 and len(t.steps[0]) == 1)
    model = SimModel(turns)
    messages = [
        {"role": "user", "content": turn.user_text},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
        {"role": "tool", "tool_call_id": "c", "content": "out"},
    ]
    assert (
        model({"model": "m", "tools": [{}], "messages": messages}, "openai").text == turn.reply_text
    )


def test_unknown_prompt_gets_a_plain_answer() -> None:
    """A prompt without a ticket tag still gets a short text reply."""
    reply = SimModel(())(
        {"model": "m", "tools": [_TOOL], "messages": [{"role": "user", "content": "hello"}]},
        "anthropic",
    )
    assert reply.text == "Noted." and not reply.tool_calls
