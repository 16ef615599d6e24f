"""Which context engine `context.engine` names: a plugin package, a registered one, or the built-in.

Resolution order (the seed's): a package in `plugins/context_engine/<name>/` exposing
`create_engine(config, **deps)`, then `register_context_engine()`'s registry, then the built-in
`compressor`. "compressor" is reserved and always means the built-in, so a plugin is never active
unless the user names it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from agent.config import HermesConfig
from agent.context_compressor import ContextCompressor
from agent.context_engine import (
    BUILTIN_ENGINE,
    DEFAULT_CONTEXT_LENGTH,
    ContextEngine,
    EngineFactory,
    registered_context_engines,
)
from agent.errors import ConfigError
from agent.providers.base import Provider
from agent.tokens import TokenCalibrator

__all__ = ["DEFAULT_PLUGINS_DIR", "available_context_engines", "load_context_engine"]

DEFAULT_PLUGINS_DIR = Path(__file__).resolve().parent.parent / "plugins" / "context_engine"
"""Where plugin engines live (`plugins/context_engine/<name>/__init__.py`)."""


def available_context_engines(plugins_dir: Path | None = None) -> list[str]:
    """Every name `context.engine` accepts: the built-in, plugin packages, registered engines."""
    names = set(registered_context_engines()) | set(
        _plugin_names(plugins_dir or DEFAULT_PLUGINS_DIR)
    )
    names.discard(BUILTIN_ENGINE)
    return [BUILTIN_ENGINE, *sorted(names)]


def load_context_engine(
    config: HermesConfig,
    *,
    summarizer: Provider,
    summary_model: str,
    plugins_dir: Path | None = None,
    calibrator: TokenCalibrator | None = None,
) -> ContextEngine:
    """Build the engine `config.context.engine` names, set to the configured main model.

    Raises ConfigError naming the available engines when the name matches nothing.
    """
    name = config.context.engine
    directory = plugins_dir or DEFAULT_PLUGINS_DIR
    deps: dict[str, Any] = {"summarizer": summarizer, "summary_model": summary_model}
    if name == BUILTIN_ENGINE:
        engine = _builtin(
            config, summarizer=summarizer, summary_model=summary_model, calibrator=calibrator
        )
    elif name.isidentifier() and name in _plugin_names(directory):
        engine = _call_factory(name, _plugin_factory(directory, name), config, deps)
    elif name in (registered := registered_context_engines()):
        engine = _call_factory(name, registered[name], config, deps)
    else:
        known = ", ".join(available_context_engines(directory))
        raise ConfigError(
            f"unknown context engine {name!r}; available engines: {known}", key="context.engine"
        )
    engine.update_model(config.model.default, config.model.context_length or DEFAULT_CONTEXT_LENGTH)
    return engine


def _builtin(
    config: HermesConfig,
    *,
    summarizer: Provider,
    summary_model: str,
    calibrator: TokenCalibrator | None,
) -> ContextEngine:
    return ContextCompressor(
        config.compression,
        summarizer=summarizer,
        summary_model=summary_model,
        summary_timeout_s=config.auxiliary.compression.timeout_s,
        provider=config.model.provider,
        max_output_tokens=config.model.max_tokens,
        calibrator=calibrator,
        ask_user_facts=config.memory.enabled and config.memory.from_compaction,
    )


def _call_factory(
    name: str, factory: EngineFactory, config: HermesConfig, deps: dict[str, Any]
) -> ContextEngine:
    engine = factory(config, **deps)
    if not isinstance(engine, ContextEngine):
        raise ConfigError(
            f"context engine {name!r} returned {type(engine).__name__}, not a ContextEngine",
            key="context.engine",
        )
    return engine


def _plugin_names(directory: Path) -> list[str]:
    if not directory.is_dir():
        return []
    return sorted(
        child.name
        for child in directory.iterdir()
        if child.name.isidentifier()
        and not child.name.startswith("_")
        and (child / "__init__.py").is_file()
    )


def _plugin_factory(directory: Path, name: str) -> EngineFactory:
    module = _import_plugin(directory, name)
    factory = getattr(module, "create_engine", None)
    if not callable(factory):
        raise ConfigError(
            f"context engine plugin {name!r} has no create_engine(config, **deps)",
            key="context.engine",
        )
    return factory  # type: ignore[no-any-return]


def _import_plugin(directory: Path, name: str) -> ModuleType:
    if directory.resolve() == DEFAULT_PLUGINS_DIR:
        return importlib.import_module(f"plugins.context_engine.{name}")
    package = directory / name
    digest = hashlib.sha1(str(package.resolve()).encode()).hexdigest()[:12]
    module_name = f"_hermes_context_engine_{name}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(
        module_name, package / "__init__.py", submodule_search_locations=[str(package)]
    )
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import context engine plugin {name!r}", key="context.engine")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise ConfigError(
            f"context engine plugin {name!r} failed to import: {exc}", key="context.engine"
        ) from exc
    return module
