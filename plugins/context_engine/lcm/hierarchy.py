"""The lcm engine's summary hierarchy as text: nodes, their levels and anchors; pure.

The active context holds one marker whose summary is a list of nodes, oldest first. A leaf
(level 0) summarizes one stretch of raw messages; a node of level n+1 condenses `FANOUT`
neighbours of level n. Every node carries the anchors of the rows it stands for, and the
marker ends with the usual index line, so `recall` and the built-in engine can read it too.
Levels never rise from left to right, so the nodes of one level are always neighbours.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agent.plugin_api import Anchor, find_anchors, merge_anchors, split_index, with_index

__all__ = ["FANOUT", "HEADER", "Node", "next_condense", "parse_nodes", "render_nodes"]

FANOUT = 4
"""How many neighbours of one level a condensed node replaces."""
HEADER = (
    "LCM summary hierarchy, oldest first. Each node stands for the archived rows its anchors "
    "name: lcm_expand an anchor to read them word for word; lcm_grep searches every row."
)
_NODE_RE = re.compile(r"^### node \d+ · level (\d{1,3}) · rows (.*)$", re.M)


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """One summary of the hierarchy."""

    level: int
    anchors: tuple[Anchor, ...]
    text: str


def parse_nodes(summary: str) -> list[Node]:
    """The nodes of an lcm marker's summary; another engine's summary becomes one level-1 node
    (its anchors from its index line), so switching to lcm keeps what was summarized."""
    body, index = split_index(summary)
    heads = list(_NODE_RE.finditer(body))
    if not heads:
        text = body.strip()
        return [Node(level=1, anchors=tuple(index), text=text)] if text else []
    nodes = []
    for n, head in enumerate(heads):
        end = heads[n + 1].start() if n + 1 < len(heads) else len(body)
        anchors = tuple(merge_anchors(find_anchors(head.group(2))))
        text = body[head.end() : end].strip()
        nodes.append(Node(level=int(head.group(1)), anchors=anchors, text=text))
    return nodes


def render_nodes(nodes: Sequence[Node]) -> str:
    """The marker's summary text: the header, every node, then the index of all anchors."""
    parts = [HEADER]
    for number, node in enumerate(nodes, start=1):
        rows = " ".join(str(a) for a in node.anchors) or "(none)"
        parts.append(f"### node {number} · level {node.level} · rows {rows}\n{node.text.strip()}")
    return with_index("\n\n".join(parts), [a for node in nodes for a in node.anchors])


def next_condense(nodes: Sequence[Node], *, fanout: int = FANOUT) -> tuple[int, int] | None:
    """`(start, end)` of the oldest `fanout` nodes of the lowest level that has more than
    `fanout` of them; None when no level is over."""
    for level in sorted({n.level for n in nodes}):
        at = [i for i, n in enumerate(nodes) if n.level == level]
        if len(at) > fanout:
            return at[0], at[0] + fanout
    return None
