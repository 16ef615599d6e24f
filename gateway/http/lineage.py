"""Which stored conversation a stateless request continues: a hash chain over its messages.

A stateless client (Open WebUI, langchain, a plain `openai` loop) resends the whole conversation
with every Chat Completions request (OpenAI API reference, "Create chat completion": `messages`
is "a list of messages comprising the conversation so far"). We split a request into its
*history* (everything up to and including the last assistant message) and its *new messages*
(the trailing user messages and tool results), and hash the history as a chain,
`head_i = sha256(head_{i-1} || normalised(message_i))`. After a turn, the session's stored head
is the chain over what the client will send back next time: the history, the new messages and
our reply as the client saw it. The next request of the same conversation has exactly that
history, so one indexed lookup of its history's head finds the session; an edited or
regenerated history has another head and matches nothing, so it can never get a wrong context.

Normalising (what is and is not matched): roles (`developer` counts as `system`), the text of
the content (a string, or the text parts of a list, joined; surrounding whitespace ignored),
other content parts verbatim, tool calls by id, name and arguments (JSON arguments compared as
JSON), and a tool result's `tool_call_id`. Ignored: `name` fields, `null` vs `""` content,
key order, and any other field. Pure functions; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ROOT",
    "Split",
    "extend",
    "head_of",
    "normalised",
    "split_request",
]

ROOT = hashlib.sha256(b"hermes-lineage-v1").hexdigest()
"""The head of the empty conversation (versioned: a change of normalising changes every head)."""

NEW_ROLES = frozenset({"user", "tool"})
"""Roles a request's new messages may have: the turn is the user's words or tool results."""
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


def _text_and_parts(content: object) -> tuple[str, list[Any]]:
    """The joined text of a content value and its non-text parts (kept verbatim)."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content.strip(), []
    if isinstance(content, list):
        texts: list[str] = []
        others: list[Any] = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type", "text") in _TEXT_PART_TYPES:
                texts.append(str(part.get("text") or ""))
            elif isinstance(part, str):
                texts.append(part)
            else:
                others.append(part)
        return "".join(texts).strip(), others
    return json.dumps(content, sort_keys=True, default=str), []


def _arguments(raw: object) -> object:
    """Tool-call arguments compared as JSON when they are JSON (clients re-serialise them)."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _calls(message: Mapping[str, Any]) -> list[list[Any]]:
    calls = message.get("tool_calls") or []
    normalised_calls: list[list[Any]] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        args = _arguments(function.get("arguments"))
        normalised_calls.append([call.get("id"), function.get("name"), args])
    return normalised_calls


def normalised(message: Mapping[str, Any]) -> bytes:
    """The bytes of `message` that the chain hashes: equal for every rendering of one message
    a client may send back (see the module docstring for what counts). Each field is length-
    prefixed, so no text can pass for another field; JSON only for the rare structured parts."""
    role = message.get("role")
    role = "system" if role == "developer" else str(role)
    text, parts = _text_and_parts(message.get("content"))
    fields = [role, text]
    if parts:
        fields.append(json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str))
    if role == "assistant":
        calls = _calls(message)
        if calls:
            fields.append(json.dumps(calls, ensure_ascii=False, sort_keys=True, default=str))
    elif role == "tool":
        fields.append(str(message.get("tool_call_id")))
    # surrogatepass: a lone surrogate (the JSON escape "\\ud800") hashes, as itself
    return "".join(f"{len(f)}:{f}" for f in fields).encode("utf-8", "surrogatepass")


def extend(head: str, messages: Iterable[Mapping[str, Any]]) -> str:
    """The chain's head after `messages` follow `head`."""
    for message in messages:
        head = hashlib.sha256(head.encode() + normalised(message)).hexdigest()
    return head


def head_of(messages: Iterable[Mapping[str, Any]]) -> str:
    """The head of a whole conversation (`ROOT` for none)."""
    return extend(ROOT, messages)


@dataclass(frozen=True, slots=True, kw_only=True)
class Split:
    """A stateless request, split into what a stored conversation may hold and what is new."""

    history: tuple[Mapping[str, Any], ...]
    """Everything before the new messages: system messages and earlier turns."""
    new: tuple[Mapping[str, Any], ...]
    """The trailing user messages and tool results: this request's turn."""

    @property
    def continues(self) -> bool:
        """Whether the history can extend a stored conversation: it ends with our reply."""
        return bool(self.history) and self.history[-1].get("role") == "assistant"


def split_request(messages: Sequence[Mapping[str, Any]]) -> Split | None:
    """`messages` as history and new messages; None when it does not end with a user message
    or tool result (there is nothing to answer)."""
    cut = len(messages)
    while cut > 0 and messages[cut - 1].get("role") in NEW_ROLES:
        cut -= 1
    if cut == len(messages):
        return None
    return Split(history=tuple(messages[:cut]), new=tuple(messages[cut:]))
