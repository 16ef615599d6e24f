"""Edit one key of config.yaml as text: every line the edit does not concern stays byte for byte.

A round-trip YAML dump re-renders the whole file (`null` becomes empty, long strings re-wrap),
so `set_in_text` only finds where the key is (ruamel's line and column marks) and rewrites that
entry: its value on its own line (keeping a trailing comment), or the lines of a block value.
A key not there yet is added under its nearest existing section. Under a flow mapping
(`telegram: {enabled: true}`) the outermost flow entry is rewritten whole, on its one line.
Pure functions: text in, text out.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.config import yaml_error_sentence
from agent.errors import ConfigError

__all__ = ["render_value", "set_in_text"]

_PLAIN = re.compile(r"[A-Za-z_./@][A-Za-z0-9_ ./:@+-]*")
_UNREADABLE = object()


def render_value(value: Any) -> str:
    """`value` as one line of YAML that reads back as the same value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        plain = value if _PLAIN.fullmatch(value) and value == value.strip() else None
        if plain is not None and _reads_back(plain) == value:
            return plain
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted one
    if isinstance(value, list):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{render_value(k)}: {render_value(v)}" for k, v in value.items()) + "}"
        )
    raise ConfigError(f"cannot write a value of type {type(value).__name__} to config.yaml")


def set_in_text(text: str, key: str, value: Any, *, path: str = "config.yaml") -> str:
    """`text` with `key` (dotted) set to `value`, changing only the lines of that entry."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.error import YAMLError

    try:
        doc = YAML().load(text) if text.strip() else None
    except YAMLError as exc:
        raise ConfigError(yaml_error_sentence(exc, path), path=path) from None
    if doc is None:
        doc = CommentedMap()
    if not isinstance(doc, CommentedMap):
        raise ConfigError(f"{path}: the top level must be a mapping of sections", path=path)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    parts = key.split(".")
    node, depth = doc, 0
    while depth < len(parts) - 1:
        child = node.get(parts[depth]) if isinstance(node, dict) else None
        if not isinstance(child, CommentedMap):
            if child is not None:
                raise ConfigError(f"{path}: '{key}' goes through a value that is not a section")
            break
        if child.fa.flow_style():
            return _rewrite_flow(lines, node, parts, depth, value)
        node, depth = child, depth + 1
    if depth == len(parts) - 1 and parts[-1] in node:
        return "".join(_replace_entry(lines, node, parts[-1], value))
    return "".join(_insert_entry(lines, node, parts[depth:], value, top=node is doc))


def _reads_back(plain: str) -> Any:
    """What `v: plain` reads as (a sentinel when it does not parse: quote it then)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        return YAML(typ="safe").load(f"v: {plain}")["v"]
    except (YAMLError, TypeError, KeyError):
        return _UNREADABLE


def _entry_end(lines: list[str], start: int, indent: int) -> int:
    """The line after the entry that starts at `start` (blank and comment lines inside a
    block value belong to it only when more indented lines follow)."""
    end = start + 1
    last = start + 1
    while end < len(lines):
        line = lines[end]
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            if len(line) - len(line.lstrip()) <= indent:
                break
            last = end + 1
        end += 1
    return last


def _replace_entry(lines: list[str], node: Any, name: str, value: Any) -> list[str]:
    line_no, col = node.lc.key(name)
    end = _entry_end(lines, line_no, col)
    original = lines[line_no]
    prefix = original[:col] + original[col:].split(":", 1)[0] + ":"
    new = f"{prefix} {render_value(value)}"
    comment = _value_comment(node, name) if end == line_no + 1 else None
    if comment is not None:  # a value on its own line keeps its comment, aligned as before
        text, column = comment
        new = new + " " * max(1, column - len(new)) + text
    return [*lines[:line_no], new + "\n", *lines[end:]]


def _value_comment(node: Any, name: str) -> tuple[str, int] | None:
    """The `# …` after the entry's value on its line, and the column it starts at."""
    tokens = node.ca.items.get(name)
    token = tokens[2] if tokens and len(tokens) > 2 else None
    if token is None or not token.value.lstrip().startswith("#"):
        return None
    return token.value.strip().split("\n", 1)[0].rstrip(), token.column


def _insert_entry(
    lines: list[str], node: Any, missing: list[str], value: Any, *, top: bool
) -> list[str]:
    """Add `missing` (the path left below `node`) as new lines at the end of `node`'s block."""
    if top:
        at, indent = len(lines), 0
    else:
        keys = list(node.keys())
        if keys:
            last_line, indent = node.lc.key(keys[-1])
            at = _entry_end(lines, last_line, indent)
        else:
            at, indent = len(lines), 2
    new = []
    for depth, name in enumerate(missing[:-1]):
        new.append(f"{' ' * (indent + 2 * depth)}{name}:\n")
    new.append(f"{' ' * (indent + 2 * (len(missing) - 1))}{missing[-1]}: {render_value(value)}\n")
    return [*lines[:at], *new, *lines[at:]]


def _rewrite_flow(lines: list[str], node: Any, parts: list[str], depth: int, value: Any) -> str:
    """Rewrite the flow mapping entry `parts[depth]` of `node` whole, with `value` set in it."""
    name = parts[depth]
    line_no, col = node.lc.key(name)
    if _entry_end(lines, line_no, col) != line_no + 1:
        raise ConfigError(
            f"'{'.'.join(parts)}' sits in a flow mapping spread over several lines; "
            "edit config.yaml by hand"
        )
    updated = _plain_copy(node[name])
    inner = updated
    for part in parts[depth + 1 : -1]:
        inner = inner.setdefault(part, {})
        if not isinstance(inner, dict):
            raise ConfigError(f"'{'.'.join(parts)}' goes through a value that is not a section")
    inner[parts[-1]] = value
    return "".join(_replace_entry(lines, node, name, updated))


def _plain_copy(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _plain_copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain_copy(v) for v in node]
    return node
