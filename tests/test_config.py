"""Config loading and validation: defaults, the example file, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import HermesConfig, load_config, parse_config
from agent.errors import ConfigError
from cli.config_cmd import set_key

ROOT = Path(__file__).resolve().parent.parent


def test_example_file_matches_the_defaults() -> None:
    """config.example.yaml documents every key with exactly the default value."""
    assert load_config(ROOT / "config.example.yaml") == HermesConfig()


def test_example_file_lists_every_key() -> None:
    """Every key of the config tree appears in config.example.yaml."""
    from ruamel.yaml import YAML

    data = YAML(typ="safe").load((ROOT / "config.example.yaml").read_text())

    def walk(model: object, node: dict, prefix: str) -> list[str]:
        missing = []
        for name in type(model).model_fields:  # type: ignore[attr-defined]
            key = f"{prefix}{name}"
            if name not in node:
                missing.append(key)
                continue
            value = getattr(model, name)
            if hasattr(type(value), "model_fields") and name != "pricing":
                missing += walk(value, node[name], key + ".")
        return missing

    assert walk(HermesConfig(), data, "") == []


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    """No config.yaml is not an error: everything has a default."""
    assert load_config(tmp_path / "config.yaml") == HermesConfig()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"compression": {"threshhold": 0.5}}, "unknown key 'compression.threshhold'"),
        ({"compression": {"threshold": 1.5}}, "bad value 1.5 for 'compression.threshold'"),
        ({"prompt_caching": {"cache_ttl": "2h"}}, "bad value '2h' for 'prompt_caching.cache_ttl'"),
        ({"model": {"provider": "acme"}}, "'model.provider'"),
        ({"context": {"engine": 3}}, "'context.engine'"),
        ({"compression": {"model_thresholds": {"glm": 2}}}, "compression.model_thresholds"),
        ([1, 2], "top level must be a mapping"),
    ],
)
def test_bad_config_names_key_value_and_file(data: object, fragment: str) -> None:
    """A bad key or value is a ConfigError naming the key, the value and the file."""
    with pytest.raises(ConfigError) as info:
        parse_config(data, path="/home/me/.hermes/config.yaml")
    assert fragment in str(info.value)
    assert "/home/me/.hermes/config.yaml" in str(info.value)


def test_secret_values_are_not_echoed_in_errors() -> None:
    """A bad api_key value is not printed back."""
    with pytest.raises(ConfigError) as info:
        parse_config({"model": {"api_key": ["sk-secret-123"]}}, path="c.yaml")
    assert "sk-secret-123" not in str(info.value)


def test_invalid_yaml_is_a_config_error(tmp_path: Path) -> None:
    """Broken YAML names the file."""
    path = tmp_path / "config.yaml"
    path.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_set_keeps_comments_and_order(tmp_path: Path) -> None:
    """`config set` edits one value and keeps the file's comments and key order."""
    path = tmp_path / "config.yaml"
    path.write_text("# mine\nmodel:\n  default: m1  # keep me\ncompression:\n  threshold: 0.5\n")
    set_key(path, "compression.threshold", "0.6")
    text = path.read_text()
    assert text == "# mine\nmodel:\n  default: m1  # keep me\ncompression:\n  threshold: 0.6\n"


def test_set_validates_before_writing(tmp_path: Path) -> None:
    """A bad value is refused and the file is left exactly as it was."""
    path = tmp_path / "config.yaml"
    path.write_text("compression:\n  threshold: 0.5\n")
    with pytest.raises(ConfigError, match="compression.threshold"):
        set_key(path, "compression.threshold", "7")
    assert path.read_text() == "compression:\n  threshold: 0.5\n"


def test_chat_ids_may_be_written_as_numbers() -> None:
    """Allowlists and channels accept ids quoted or not; they are compared as strings."""
    config = parse_config(
        {"gateway": {"telegram": {"allowed_users": [123, "456"]}, "discord": {"channels": [7]}}}
    )
    assert config.gateway.telegram.allowed_users == ["123", "456"]
    assert config.gateway.discord.channels == ["7"]
