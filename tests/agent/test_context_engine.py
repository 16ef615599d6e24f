"""The context engine seam: resolution order, registry, plugin loading and errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import context_engine
from agent.config import HermesConfig, parse_config
from agent.context_compressor import ContextCompressor
from agent.context_engine import register_context_engine
from agent.engine_resolution import available_context_engines, load_context_engine
from agent.errors import ConfigError
from tests.fakes.provider import FakeProvider

PLUGIN = '''"""A test plugin engine."""
from __future__ import annotations
from plugins.context_engine.truncate import TruncateEngine

class {cls}(TruncateEngine):
    name = "{name}"

def create_engine(config, **deps):
    assert set(deps) == {{"summarizer", "summary_model"}}
    return {cls}(config.compression)
'''


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    saved = dict(context_engine._REGISTRY)
    yield
    context_engine._REGISTRY.clear()
    context_engine._REGISTRY.update(saved)


def _config(engine: str, **model: object) -> HermesConfig:
    return parse_config({"context": {"engine": engine}, "model": model})


def _load(config: HermesConfig, plugins_dir: Path | None = None):  # type: ignore[no-untyped-def]
    return load_context_engine(
        config, summarizer=FakeProvider(), summary_model="aux", plugins_dir=plugins_dir
    )


def _write_plugin(root: Path, name: str) -> Path:
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(PLUGIN.format(cls=name.title() + "Engine", name=name))
    return root


def test_default_is_the_builtin_compressor_set_to_the_main_model() -> None:
    """context.engine "compressor" builds ContextCompressor with the configured window."""
    engine = _load(_config("compressor", default="gpt-5", context_length=1_000_000))
    assert isinstance(engine, ContextCompressor)
    assert engine.context_length == 1_000_000 and engine.threshold_tokens == 500_000
    assert engine.status().model == "gpt-5"


def test_plugin_directory_engine_loads_when_named(tmp_path: Path) -> None:
    """A package in the plugins directory is built through its create_engine."""
    root = _write_plugin(tmp_path / "engines", "lossless")
    engine = _load(_config("lossless"), root)
    assert engine.name == "lossless"
    assert "lossless" in available_context_engines(root)


def test_plugin_is_never_active_unless_named(tmp_path: Path) -> None:
    """With a plugin present, the default config still gets the built-in compressor."""
    root = _write_plugin(tmp_path / "engines", "lossless")
    assert isinstance(_load(_config("compressor"), root), ContextCompressor)


def test_registered_engine_loads_and_compressor_is_reserved(tmp_path: Path) -> None:
    """register_context_engine adds a name; "compressor" cannot be taken over."""
    made: list[str] = []

    def factory(config: HermesConfig, **deps: object) -> ContextCompressor:
        made.append(str(deps["summary_model"]))
        return ContextCompressor(config.compression, summarizer=FakeProvider(), summary_model="x")

    register_context_engine("custom", factory)
    assert isinstance(_load(_config("custom"), tmp_path), ContextCompressor) and made == ["aux"]
    with pytest.raises(ValueError, match="built-in"):
        register_context_engine("compressor", factory)


def test_plugin_directory_wins_over_the_registry(tmp_path: Path) -> None:
    """Resolution checks plugins/context_engine/<name>/ before the registry."""
    root = _write_plugin(tmp_path / "engines", "dual")
    register_context_engine("dual", lambda config, **deps: pytest.fail("registry used"))
    assert _load(_config("dual"), root).name == "dual"


def test_unknown_engine_is_a_config_error_listing_the_available(tmp_path: Path) -> None:
    """An unknown name fails at start-up and names every engine that exists."""
    root = _write_plugin(tmp_path / "engines", "lossless")
    register_context_engine("custom", lambda config, **deps: None)
    with pytest.raises(ConfigError) as info:
        _load(_config("lcm"), root)
    message = str(info.value)
    assert "'lcm'" in message and "compressor" in message
    assert "lossless" in message and "custom" in message and info.value.key == "context.engine"


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ('"""No factory."""\n', "create_engine"),
        ('"""Wrong type."""\ndef create_engine(config, **deps):\n    return object()\n', "not a"),
        ('"""Broken."""\nraise RuntimeError("nope")\n', "failed to import"),
    ],
)
def test_bad_plugins_are_config_errors(tmp_path: Path, source: str, match: str) -> None:
    """A plugin without a factory, returning the wrong type, or failing to import is reported."""
    pkg = tmp_path / "engines" / "bad"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(source)
    with pytest.raises(ConfigError, match=match):
        _load(_config("bad"), tmp_path / "engines")


def test_default_plugins_directory_lists_the_example() -> None:
    """The shipped example plugin is discoverable but the built-in stays first."""
    names = available_context_engines()
    assert names[0] == "compressor" and "truncate" in names
