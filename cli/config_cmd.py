"""`hermes config show | get | set | path`: read and edit config.yaml without losing its comments."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

from agent.config import HermesConfig, did_you_mean, load_config, parse_config
from agent.errors import ConfigError

__all__ = ["config_path", "config_warnings", "get_key", "run_config_command", "set_key"]

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
                for warning in set_key(path, args.key, args.value):
                    print(f"hermes: warning: {warning}", file=sys.stderr)
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
            raise ConfigError(f"unknown key '{key}'{did_you_mean(key)}", key=key)
        node = node[part]
    return node


def set_key(path: Path, key: str, raw_value: str) -> list[str]:
    """Parse `raw_value` as YAML, validate the whole file with it, then write it back with
    only that entry's lines changed. Returns warnings about settings that have no effect."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from cli.config_edit import set_in_text

    try:
        value = YAML(typ="safe").load(raw_value) if raw_value.strip() else None
    except YAMLError:
        raise ConfigError(
            f"the value {raw_value!r} for '{key}' is not valid YAML; quote it if it is text",
            key=key,
        ) from None
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    updated = set_in_text(text, key, value, path=str(path))
    config = parse_config(YAML(typ="safe").load(updated), path=str(path))  # names key, value
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(updated, encoding="utf-8")
    tmp.replace(path)
    return config_warnings(config)


def config_warnings(config: HermesConfig) -> list[str]:
    """Settings that are valid but do nothing on the usual models, one sentence each."""
    from agent.compaction.threshold import SMALL_CONTEXT_FLOOR, SMALL_CONTEXT_WINDOW
    from agent.config import DEFAULT_THRESHOLD

    floor, window = SMALL_CONTEXT_FLOOR, f"{SMALL_CONTEXT_WINDOW // 1000}K"
    cfg = config.compression
    warnings = []
    if cfg.threshold < floor and cfg.threshold != DEFAULT_THRESHOLD:  # the default is meant so
        warnings.append(
            f"compression.threshold {cfg.threshold:g} has no effect on models with windows "
            f"under {window} tokens (most of them): they compact at {floor:g} at the earliest; "
            f"it applies to {window}+ windows only"
        )
    for name, ratio in cfg.model_thresholds.items():
        if ratio < floor:
            warnings.append(
                f"compression.model_thresholds.{name} {ratio:g} is raised to {floor:g} on "
                f"windows under {window} tokens"
            )
    return warnings


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
