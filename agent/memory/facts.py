"""Facts about the user, asked for in the compaction summary call and parsed out of its reply.

Pure functions. The summary request gains one more instruction (`FACTS_REQUEST`): after the
summary, a `<user-facts>` section listing what is worth keeping about the person beyond this
conversation, each fact citing the row it comes from. `split_user_facts` takes the section out
(the stored summary never carries it) and `anchor_facts` ties every fact to rows the compaction
really absorbed, so `recall` of a note's anchor returns its source. No extra model call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agent.archive.anchors import Anchor, find_anchors
from agent.messages import ChatMessage

__all__ = [
    "FACTS_CLOSE",
    "FACTS_OPEN",
    "FACTS_REQUEST",
    "MAX_FACTS",
    "UserFact",
    "anchor_facts",
    "split_user_facts",
]

FACTS_OPEN = "<user-facts>"
FACTS_CLOSE = "</user-facts>"
MAX_FACTS = 20
"""At most this many facts are kept from one compaction."""
MAX_FACT_CHARS = 400
FACTS_REQUEST = f"""After the summary, add one more section, which is NOT part of the summary: a line {FACTS_OPEN}, then one line per fact about the user worth keeping beyond this conversation (who they are, their circumstances, the people and things in their life, lasting preferences about how they want to be answered), each line starting with "- " and ending with the anchor of the row it comes from, like [#1203]; then a line {FACTS_CLOSE}. Only what the user said or confirmed about themselves; nothing about the task at hand, nothing temporary, no credentials. If there is nothing, write {FACTS_OPEN} None {FACTS_CLOSE}."""
_SECTION_RE = re.compile(
    re.escape(FACTS_OPEN) + r"(.*?)(?:" + re.escape(FACTS_CLOSE) + r"|\Z)", re.S | re.I
)
_ITEM_RE = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+(.*\S)\s*$")
_ANCHOR_TEXT_RE = re.compile(r"\s*\(?\[\s*#[^\]\n]{0,40}\]\)?")


@dataclass(frozen=True, slots=True, kw_only=True)
class UserFact:
    """One fact the summarizer found, with the rows it came from (when it said so)."""

    text: str
    anchor: Anchor | None = None


def split_user_facts(reply: str) -> tuple[str, tuple[UserFact, ...]]:
    """The summary without the facts section, and the facts it listed (without anchors' text)."""
    facts: list[UserFact] = []
    for match in _SECTION_RE.finditer(reply):
        for line in match.group(1).splitlines():
            item = _ITEM_RE.match(line)
            if item is None:
                continue
            anchors = find_anchors(item.group(1))
            text = " ".join(_ANCHOR_TEXT_RE.sub("", item.group(1)).split()).strip(" .;")
            if text and text.casefold() not in {"none", "n/a", "nothing"}:
                anchor = anchors[0] if anchors else None
                facts.append(UserFact(text=text[:MAX_FACT_CHARS], anchor=anchor))
    summary = _SECTION_RE.sub("", reply).strip()
    return summary, tuple(facts[:MAX_FACTS])


def anchor_facts(
    facts: Sequence[UserFact], absorbed: Sequence[ChatMessage]
) -> tuple[UserFact, ...]:
    """Each fact anchored to absorbed rows: its own anchor cut to the absorbed span when it
    points inside it, else the span of the absorbed user messages (else of all absorbed rows)."""
    ids = [i for m in absorbed if isinstance(i := m.get("_id"), int) and not isinstance(i, bool)]
    if not ids:
        return tuple(UserFact(text=f.text) for f in facts)
    users = [i for m in absorbed if m.get("role") == "user" and isinstance(i := m.get("_id"), int)]
    span = Anchor(first=min(users or ids), last=max(users or ids))
    known = set(ids)
    anchored: list[UserFact] = []
    for fact in facts:
        anchor = fact.anchor
        if anchor is not None:
            inside = [i for i in known if anchor.first <= i <= anchor.last]
            anchor = Anchor(first=min(inside), last=max(inside)) if inside else None
        anchored.append(UserFact(text=fact.text, anchor=anchor or span))
    return tuple(anchored)
