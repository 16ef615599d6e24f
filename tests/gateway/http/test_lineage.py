"""The lineage hash chain: every rendering of one conversation has one head; any edit changes it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.http.lineage import ROOT, extend, head_of, normalised, split_request

_text = st.text(min_size=1, max_size=30).filter(lambda t: t.strip() != "")
_call = st.fixed_dictionaries(
    {
        "id": st.from_regex(r"call_[a-z0-9]{4}", fullmatch=True),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["lookup", "weather"]),
                "arguments": st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=3).map(
                    json.dumps
                ),
            }
        ),
    }
)
_message = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, _text),
    st.builds(lambda t: {"role": "assistant", "content": t}, _text),
    st.builds(lambda c: {"role": "assistant", "content": None, "tool_calls": [c]}, _call),
    st.builds(lambda t, i: {"role": "tool", "content": t, "tool_call_id": i}, _text, _text),
    st.builds(lambda t: {"role": "system", "content": t}, _text),
)
_conversation = st.lists(_message, min_size=1, max_size=12)


def _as_client_resends(message: dict[str, Any]) -> dict[str, Any]:
    """The same message as another client renders it: text parts, a name, keys reordered,
    arguments re-serialised, None content as ""."""
    other: dict[str, Any] = dict(reversed(list(message.items())))
    content = message.get("content")
    if isinstance(content, str):
        other["content"] = [
            {"type": "text", "text": content[:3]},
            {"type": "text", "text": content[3:]},
        ]
    elif content is None:
        other["content"] = ""
    if "tool_calls" in message:
        calls = []
        for call in message["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            function = {"name": call["function"]["name"], "arguments": json.dumps(args, indent=2)}
            calls.append({**call, "function": function})
        other["tool_calls"] = calls
    other["name"] = "someone"
    return other


@given(_conversation)
def test_every_rendering_of_a_conversation_has_one_head(messages: list[dict[str, Any]]) -> None:
    """String vs text parts, `name` fields, key order, null content and re-serialised
    arguments do not change the head."""
    assert head_of(messages) == head_of([_as_client_resends(m) for m in messages])


@given(_conversation, st.data())
def test_an_edit_anywhere_changes_the_head(
    messages: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Editing any message's text, or dropping any message, gives another head."""
    index = data.draw(st.integers(0, len(messages) - 1))
    edited = [dict(m) for m in messages]
    edited[index]["content"] = str(edited[index].get("content") or "") + " (edited)"
    dropped = messages[:index] + messages[index + 1 :]
    assert head_of(edited) != head_of(messages)
    assert head_of(dropped) != head_of(messages)


@given(_conversation, _conversation)
def test_the_chain_extends(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> None:
    """The head of a conversation is its prefix's head extended by the rest."""
    assert extend(head_of(first), second) == head_of(first + second)


def test_roles_and_tool_ids_count_and_developer_is_system() -> None:
    assert head_of([{"role": "user", "content": "x"}]) != head_of(
        [{"role": "assistant", "content": "x"}]
    )
    tool = {"role": "tool", "content": "ok", "tool_call_id": "a"}
    assert normalised(tool) != normalised({**tool, "tool_call_id": "b"})
    assert normalised({"role": "developer", "content": "be brief"}) == normalised(
        {"role": "system", "content": "be brief"}
    )
    assert head_of([]) == ROOT


def test_split_takes_the_trailing_user_and_tool_messages_as_new() -> None:
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}]
    reply = {"role": "assistant", "content": "b"}
    new = [{"role": "user", "content": "c"}]
    split = split_request([*history, reply, *new])
    assert split is not None and split.continues
    assert list(split.history) == [*history, reply] and list(split.new) == new
    fresh = split_request(history)
    assert fresh is not None and not fresh.continues and list(fresh.new) == history[1:]
    assert split_request([*history, reply]) is None


def test_lone_surrogates_hash_as_themselves() -> None:
    """A JSON body may carry "\\ud800": it hashes (it is no UTF-8) and stays distinct."""
    lone = head_of([{"role": "user", "content": "x\ud800y"}])
    assert lone != head_of([{"role": "user", "content": "x\ufffdy"}])
