"""`hermes config show | get | set | path`: read and edit config.yaml without losing its comments."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

from agent.config import HermesConfig, load_config, parse_config
from agent.errors import ConfigError

__all__ = ["config_path", "get_key", "run_config_command", "set_key"]

_SECRET_SUFFIXES = ("api_key", "token")


def config_path(home: Path) -> Path:
    return home / "config.yaml"


def run_config_command(args: argparse.Namespace, home: Path) -> int:
    path = config_path(home)
    try:
        match args.config_command:
            case "path":
                print(path)
            case "show":
                print(_dump_yaml(_masked(load_config(path).model_dump(mode="json"))), end="")
            case "get":
                value = get_key(load_config(path), args.key)
                masked = "<set>" if args.key.endswith(_SECRET_SUFFIXES) and value else value
                print(json.dumps(masked) if not isinstance(masked, str) else masked)
            case "set":
                set_key(path, args.key, args.value)
                print(f"{args.key} set in {path}")
            case unknown:  # argparse only passes the actions it was built with
                raise ValueError(f"unknown config action {unknown!r}")
    except ConfigError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 2
    return 0


def get_key(config: HermesConfig, key: str) -> Any:
    node: Any = config.model_dump(mode="json")
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"unknown key '{key}'", key=key)
        node = node[part]
    return node


def set_key(path: Path, key: str, raw_value: str) -> None:
    """Parse `raw_value` as YAML, validate the whole file with it, then write it back."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    yaml = YAML()  # round-trip: keeps comments and key order
    doc = yaml.load(path.read_text(encoding="utf-8")) if path.exists() else None
    if doc is None:
        doc = CommentedMap()
    value = YAML(typ="safe").load(raw_value) if raw_value.strip() else None
    parts = key.split(".")
    node = doc
    for part in parts[:-1]:
        if part not in node or node[part] is None:
            node[part] = CommentedMap()
        node = node[part]
        if not isinstance(node, dict):
            raise ConfigError(
                f"{path}: '{key}' goes through a value that is not a section", key=key
            )
    node[parts[-1]] = value
    parse_config(_plain(doc), path=str(path))  # raises ConfigError naming key, value, file
    buf = io.StringIO()
    yaml.dump(doc, buf)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(buf.getvalue(), encoding="utf-8")
    tmp.replace(path)


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def _masked(node: Any, key: str = "") -> Any:
    if isinstance(node, dict):
        return {k: _masked(v, k) for k, v in node.items()}
    if key.endswith(_SECRET_SUFFIXES) and node:
        return "<set>"
    return node


def _dump_yaml(data: Any) -> str:
    from ruamel.yaml import YAML

    buf = io.StringIO()
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    yaml.dump(data, buf)
    return buf.getvalue()
