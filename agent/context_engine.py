"""The context engine seam: the `ContextEngine` ABC, its result value, and the engine registry.

Global state department: `_REGISTRY` below is the one piece of module-level mutable state here.
It is filled only by explicit `register_context_engine()` calls (from `run_agent.py`, a plugin
set-up, or a test); importing this module registers nothing.

Resolution of `context.engine` (see `load_context_engine`): a package in
`plugins/context_engine/<name>/` exposing `create_engine(config, **deps)`, then the registry, then
the built-in `compressor`. "compressor" is reserved and always means the built-in, so a plugin is
never active unless the user names it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from agent.errors import ConfigError
from agent.messages import ChatMessage
from agent.providers.base import Provider, Usage
from agent.tools.registry import Tool

if TYPE_CHECKING:
    from agent.config import HermesConfig

__all__ = [
    "BUILTIN_ENGINE",
    "DEFAULT_CONTEXT_LENGTH",
    "CompressResult",
    "ContextEngine",
    "EngineFactory",
    "available_context_engines",
    "load_context_engine",
    "register_context_engine",
]

BUILTIN_ENGINE = "compressor"
DEFAULT_CONTEXT_LENGTH = 200_000
"""Used until `update_model` says otherwise (config `model.context_length` unset)."""
DEFAULT_PLUGINS_DIR = Path(__file__).resolve().parent.parent / "plugins" / "context_engine"

EngineFactory = Callable[..., "ContextEngine"]
"""`factory(config, *, summarizer=..., summary_model=...) -> ContextEngine`."""

_REGISTRY: dict[str, EngineFactory] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompressResult:
    """What one compaction produced; the agent loop hands `messages` to the store."""

    messages: list[ChatMessage]
    """The new active transcript. Carried messages keep `_id`/`_persisted`; changed or new
    ones (the summary marker, a system message that gained the note, pruned tool results)
    have neither."""
    summary_tokens: int
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    outcome: str
    """"compressed" (model summary) or "local_summary" (deterministic fallback)."""
    reason: str
    """Why it ran: "threshold", "manual", "context_too_long", ..."""
    duration_ms: float
    detail: str = ""
    """How much the plan had to degrade: "", "tail_pruned" or "tail_shrunk"."""


class ContextEngine(ABC):
    """Decides when and how the active transcript shrinks. One instance per session."""

    name: str

    @abstractmethod
    def update_model(self, model: str, context_length: int) -> None:
        """The session now talks to `model` with this window; thresholds are re-resolved."""

    @abstractmethod
    def update_from_usage(self, usage: Usage, messages_sent: Sequence[ChatMessage]) -> None:
        """A provider reply reported `usage` for a request that carried `messages_sent`."""

    @abstractmethod
    def should_compress(self, messages: Sequence[ChatMessage]) -> bool:
        """Cheap, no I/O: should the loop compact before the next model call?"""

    @abstractmethod
    async def compress(
        self, messages: list[ChatMessage], *, focus: str | None = None, reason: str = "threshold"
    ) -> CompressResult:
        """Compact `messages` (never mutated). Raises CompactionRefused, transcript untouched."""

    def tools(self) -> list[Tool]:
        """Tools this engine offers the agent (e.g. a search over what it folded away)."""
        return []

    @abstractmethod
    def status(self) -> dict[str, Any]:
        """Counts for `/status` and telemetry: threshold_tokens, last_prompt_tokens, ..."""

    @abstractmethod
    def reset_session(self) -> None:
        """Forget per-session state (previous summary, usage, backoff)."""

    @property
    @abstractmethod
    def threshold_tokens(self) -> int: ...

    @property
    @abstractmethod
    def context_length(self) -> int: ...


def register_context_engine(name: str, factory: EngineFactory) -> None:
    """Make `factory` available as `context.engine: <name>`; "compressor" is reserved."""
    if name == BUILTIN_ENGINE:
        raise ValueError(f"{BUILTIN_ENGINE!r} is the built-in engine and cannot be replaced")
    if not name.isidentifier():
        raise ValueError(f"context engine name {name!r} must be a Python identifier")
    _REGISTRY[name] = factory


def available_context_engines(plugins_dir: Path | None = None) -> list[str]:
    """Every name `context.engine` accepts: the built-in, plugin packages, registered engines."""
    names = set(_REGISTRY) | set(_plugin_names(plugins_dir or DEFAULT_PLUGINS_DIR))
    names.discard(BUILTIN_ENGINE)
    return [BUILTIN_ENGINE, *sorted(names)]


def load_context_engine(
    config: HermesConfig,
    *,
    summarizer: Provider,
    summary_model: str,
    plugins_dir: Path | None = None,
) -> ContextEngine:
    """Build the engine `config.context.engine` names, set to the configured main model.

    Raises ConfigError naming the available engines when the name matches nothing.
    """
    name = config.context.engine
    directory = plugins_dir or DEFAULT_PLUGINS_DIR
    deps: dict[str, Any] = {"summarizer": summarizer, "summary_model": summary_model}
    if name == BUILTIN_ENGINE:
        engine = _builtin(config, summarizer=summarizer, summary_model=summary_model)
    elif name.isidentifier() and name in _plugin_names(directory):
        engine = _call_factory(name, _plugin_factory(directory, name), config, deps)
    elif name in _REGISTRY:
        engine = _call_factory(name, _REGISTRY[name], config, deps)
    else:
        known = ", ".join(available_context_engines(directory))
        raise ConfigError(
            f"unknown context engine {name!r}; available engines: {known}", key="context.engine"
        )
    engine.update_model(config.model.default, config.model.context_length or DEFAULT_CONTEXT_LENGTH)
    return engine


def _builtin(config: HermesConfig, *, summarizer: Provider, summary_model: str) -> ContextEngine:
    from agent.context_compressor import ContextCompressor

    return ContextCompressor(
        config.compression,
        summarizer=summarizer,
        summary_model=summary_model,
        summary_timeout_s=config.auxiliary.compression.timeout_s,
        provider=config.model.provider,
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
