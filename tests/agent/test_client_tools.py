"""`admit`: the caller's next messages join a transcript whose last turn ended with calls to
the caller's tools, keeping every call paired with one result before the next user message."""

from __future__ import annotations

import pytest

from agent.client_tools import NOT_ANSWERED_RESULT, admit, pending_calls
from agent.compaction.sanitize import find_orphans
from agent.errors import TurnRefused
from agent.messages import ChatMessage, assistant_message, tool_message, user_message


def _calls(*ids: str) -> ChatMessage:
    return assistant_message(
        None,
        [
            {"id": i, "type": "function", "function": {"name": f"f_{i}", "arguments": "{}"}}
            for i in ids
        ],
    )


def _result(call_id: str, text: str = "ok") -> ChatMessage:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


BASE = [{"role": "system", "content": "s"}, user_message("go")]


def test_results_answer_the_waiting_calls_with_their_tool_names() -> None:
    transcript = [*BASE, _calls("a", "b")]
    assert [c["id"] for c in pending_calls(transcript)] == ["a", "b"]
    added = admit(transcript, [_result("b", "2"), _result("a", "1")])
    assert [(m["tool_call_id"], m["name"], m["content"]) for m in added] == [
        ("b", "f_b", "2"),
        ("a", "f_a", "1"),
    ]
    assert find_orphans([*transcript, *added]) == ([], [])


def test_a_result_for_an_unknown_call_is_refused_naming_it() -> None:
    with pytest.raises(TurnRefused) as caught:
        admit([*BASE, _calls("a")], [_result("a"), _result("zzz")])
    assert caught.value.index == 1 and caught.value.field == "tool_call_id"
    assert "zzz" in str(caught.value)
    with pytest.raises(TurnRefused):
        admit(BASE, [_result("a")])  # nothing is waiting at all


def test_results_that_leave_a_call_unanswered_are_refused() -> None:
    with pytest.raises(TurnRefused) as caught:
        admit([*BASE, _calls("a", "b")], [_result("a")])
    assert "'b'" in str(caught.value)


def test_a_new_user_message_closes_the_abandoned_calls_first() -> None:
    transcript = [*BASE, _calls("a", "b"), tool_message("a", "f_a", "done")]
    added = admit(transcript, [user_message("never mind")])
    assert [m["role"] for m in added] == ["tool", "user"]
    assert added[0]["tool_call_id"] == "b" and added[0]["content"] == NOT_ANSWERED_RESULT
    assert find_orphans([*transcript, *added]) == ([], [])


def test_a_plain_user_message_passes_through() -> None:
    message = user_message("hi")
    assert admit(BASE, [message]) == [message]


def test_history_sent_whole_pairs_its_own_calls_and_results() -> None:
    """A stateless client's history: its assistant tool calls are answered by the results
    that follow them in the same request; an unanswered one is closed before the next user
    message."""
    said = [user_message("go"), _calls("x"), _result("x", "1"), _calls("y"), user_message("next")]
    added = admit([{"role": "system", "content": "s"}], said)
    assert [m["role"] for m in added] == ["user", "assistant", "tool", "assistant", "tool", "user"]
    assert added[2]["name"] == "f_x" and added[4]["content"] == NOT_ANSWERED_RESULT
    assert find_orphans(added) == ([], [])
