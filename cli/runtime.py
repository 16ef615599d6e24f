"""Wire one runtime from config: providers, store, context engine, tools, caching.

Both `hermes chat` and `hermes gateway run` build a `Runtime` and ask it for per-session agents.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from agent.agent import AgentDeps, AIAgent, EndOfTurnWork
from agent.config import CompressionConfig, HermesConfig
from agent.events import EventSink
from agent.providers.base import Provider, ProviderSettings
from agent.providers.window_memory import WindowMemory
from agent.tokens import TokenCalibrator
from agent.tools.registry import Approver, ToolContext, ToolRegistry
from cli.tool_setup import tool_setup
from state.contract import Lease, MemoryStore

if TYPE_CHECKING:
    from agent.mcp import McpHub
    from agent.media.outbox import Outbox
    from agent.memory.view import MemoryBackend
    from gateway.media_intake import MediaIntake
    from gateway.metrics import MetricsRecorder
    from state import MediaStore, OpObserver

__all__ = ["Runtime"]

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class Runtime:
    """A started runtime; close it with `aclose()` (or `async with`)."""

    config: HermesConfig
    home: Path
    settings: ProviderSettings
    provider: Provider
    summarizer: Provider
    store: Any
    context_length: int
    caching_status: str
    deps: AgentDeps
    _providers_to_close: tuple[Provider, ...]
    _session_providers: dict[str, Provider] = field(default_factory=dict)
    """Per-session providers (the Codex app-server: one subprocess per session)."""
    memory: MemoryStore | None = None
    """What Hermes remembers about people (the store itself); None when memory is off."""
    notices: list[str] = field(default_factory=list)
    """One-time messages for the operator (e.g. the gpt-5.5 autoraise)."""
    mcp: McpHub | None = None
    """The configured MCP servers, started with the runtime and stopped with it."""
    media: MediaStore | None = None
    """Photos, voice notes and files people sent, under HERMES_HOME/media."""
    media_intake: MediaIntake | None = None
    """How the runner takes files that come with messages (`gateway.media_intake`)."""
    outbox: Outbox | None = None
    """Files `send_file` queued, sent by the chat's reply sink after the reply."""

    @classmethod
    async def start(
        cls,
        config: HermesConfig,
        home: Path,
        environ: Mapping[str, str],
        *,
        model_override: str | None = None,
        approver: Approver | None = None,
        workspace: Path | None = None,
        end_of_turn: tuple[EndOfTurnWork, ...] | None = None,
        on_event: EventSink | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        metrics: MetricsRecorder | None = None,
    ) -> Runtime:
        """Build everything from config. `workspace` is where file tools may write (default:
        `tools.workspace`, else the current directory). `clock` and `sleep` drive end-of-turn
        timing (the cold prompt cache); a simulation passes its own. With `metrics`, model
        calls, store operations, micro passes and compaction events are recorded there."""
        from agent.engine_resolution import load_context_engine
        from agent.media.attach import MediaProvider
        from agent.media.outbox import Outbox
        from agent.prompt_caching import caching_decision
        from agent.providers.context_window import resolve_window
        from agent.providers.registry import build_provider, resolve_aux_settings, resolve_settings
        from agent.providers.window_memory import WINDOW_MEMORY_FILE, WindowMemory
        from agent.server_slot import ServerSlot, resolve_concurrency
        from state import MediaStore, SqlSessionStore, default_url

        settings = resolve_settings(config.model, environ, model_override=model_override)
        aux_settings = resolve_aux_settings(config.auxiliary.compression, settings, environ)
        trigger = _LocalTrigger(config.compression, settings)
        provider = build_provider(
            settings, compression=config.compression, local_trigger_tokens=trigger
        )
        summarizer = provider if aux_settings == settings else build_provider(aux_settings)
        opened: list[Provider] = [provider] if summarizer is provider else [provider, summarizer]
        if metrics is not None:
            provider, summarizer = _metered(provider, summarizer, metrics)
        store = None
        mcp: McpHub | None = None
        try:
            memory = WindowMemory(home / WINDOW_MEMORY_FILE)
            window = await resolve_window(
                settings.model,
                config.model.context_length,
                base_url=settings.base_url,
                api_key=settings.api_key,
                learned=memory.learned(settings.base_url, settings.model),
                local=settings.provider == "custom",
            )
            context_length = trigger.context_length = window.tokens
            learned = _WindowLearner(memory, settings, trigger)
            calibrator = _calibrator(memory, settings)
            store = await SqlSessionStore.open(
                config.state.url or default_url(home),
                lease_ttl_s=config.state.lease_ttl_s,
                on_op=_store_observer(metrics),
                verify=True,  # a damaged file is refused before anything writes to it
            )
            media = MediaStore(store, home / "media")
            outbox = Outbox()
            provider = MediaProvider(provider, media, vision=config.model.vision)
            decision = caching_decision(
                settings.model,
                settings.provider,
                settings.base_url,
                enabled=config.prompt_caching.enabled,
                ttl=config.prompt_caching.cache_ttl,
            )
            mcp = await _start_mcp(config, home, environ)
            tools = _build_tools(config, mcp, environ)
            setup = tool_setup(config, home, environ, workspace)
            deps = AgentDeps(
                config=config,
                provider=provider,
                store=store,
                memory=_memory_backend(config, store.memory, environ),
                engine_factory=lambda: load_context_engine(
                    config,
                    summarizer=summarizer,
                    summary_model=aux_settings.model,
                    calibrator=calibrator,
                ),
                tools=tools,
                tool_context=ToolContext(
                    session_id="",
                    cwd=setup.workspace.root,
                    approver=approver,
                    approval_policy=config.tools.approval,
                    workspace=setup.workspace,
                    terminal=setup.terminal,
                    timeout_s=config.agent.tool_timeout_s,
                    max_output_chars=config.tools.max_output_chars,
                    services={
                        "store": store,
                        "jobs": store.jobs,
                        "on_event": on_event,
                        "media": media,
                        "outbox": outbox,
                    },
                ),
                cache_ttl=decision.ttl if decision.enabled else None,
                cache_blocks_only=settings.provider != "anthropic",
                end_of_turn=_metered_work(
                    _default_end_of_turn(
                        config, summarizer=summarizer, summary_model=aux_settings.model
                    )
                    if end_of_turn is None
                    else end_of_turn,
                    metrics,
                ),
                on_event=on_event if metrics is None else _event_sink(metrics, on_event),
                on_window_learned=learned,
                clock=clock,
                sleep=sleep,
                server_slot=ServerSlot(
                    resolve_concurrency(
                        config.model.concurrency,
                        provider=settings.provider,
                        shares_server=aux_settings.base_url == settings.base_url,
                    )
                ),
            )
        except BaseException:
            if mcp is not None:
                await mcp.aclose()
            if store is not None:
                await store.aclose()
            for p in opened:
                await p.aclose()
            raise
        notices = [*setup.notices, *_autoraise_notices(config, settings, home, context_length)]
        if window.source == "default":
            notices.append(
                f"Note: the context window of {settings.model} is unknown; assuming "
                f"{context_length:,} tokens until the server says otherwise. Set "
                "model.context_length in config.yaml to be sure."
            )
        notices += _mcp_notices(mcp)
        runtime = cls(
            mcp=mcp,
            notices=notices,
            config=config,
            home=home,
            settings=settings,
            provider=provider,
            summarizer=summarizer,
            store=store,
            context_length=context_length,
            caching_status=decision.status_line,
            deps=deps,
            memory=deps.memory.store if deps.memory is not None else None,
            _providers_to_close=tuple(opened),
            media=media,
            media_intake=_media_intake(config, media, environ, context_length),
            outbox=outbox,
        )
        learned.runtime = runtime
        return runtime

    async def open_agent(self, session_id: str) -> AIAgent:
        """The session's agent, on the model the session last switched to (`/model`)."""
        from agent.providers.context_window import context_length_for
        from agent.session_meta import read_meta

        model, window = self.settings.model, self.context_length
        switched = (await read_meta(self.store.meta, session_id)).model
        if switched and switched != model:
            model, window = switched, context_length_for(switched, None) or window
        deps = self.deps
        if self.settings.api_mode == "codex_app_server":
            deps = self._app_server_deps(session_id)
        return await AIAgent.open(deps, session_id=session_id, model=model, context_length=window)

    def _app_server_deps(self, session_id: str) -> AgentDeps:
        """The codex agent owns its thread: one app-server provider and engine per session."""
        from agent.codex.app_server import CodexAppServerProvider
        from agent.codex.app_server_engine import CodexAppServerEngine
        from agent.session_meta import append_codex_boundary

        provider = CodexAppServerProvider(self.settings)
        self._session_providers[session_id] = provider
        store = self.store

        async def on_boundary(record: dict[str, Any]) -> None:
            await append_codex_boundary(store.meta, session_id, record)

        def engine() -> Any:
            return CodexAppServerEngine(
                self.config.compression, compactor=provider, on_boundary=on_boundary
            )

        if self.media is None:
            return replace(self.deps, provider=provider, engine_factory=engine)
        from agent.media.attach import MediaProvider

        # The app-server protocol takes text: a photo reaches it as the one-line note.
        shown = MediaProvider(provider, self.media, vision=False)
        return replace(self.deps, provider=shown, engine_factory=engine)

    def lock_session(self, session_id: str) -> AbstractAsyncContextManager[Lease]:
        """The session's turn lock, waiting at most `state.lock_timeout_s` (saying so on
        stderr), so the CLI and a live gateway never interleave turns of one session."""
        timeout_s = self.config.state.lock_timeout_s

        async def on_wait() -> None:
            print(
                f"hermes: session {session_id} is busy elsewhere (a gateway?); "
                f"waiting up to {timeout_s:g} s",
                file=sys.stderr,
            )

        return self.store.locks.lock_session(session_id, timeout_s=timeout_s, on_wait=on_wait)  # type: ignore[no-any-return]

    async def release_agent(self, agent: AIAgent) -> None:
        """Free what is held for a session that left memory (its store rows stay)."""
        for work in agent.deps.end_of_turn:
            work.forget_session(agent.session_id)
        provider = self._session_providers.pop(agent.session_id, None)
        if provider is not None:
            await provider.aclose()

    async def aclose(self) -> None:
        if self.mcp is not None:
            await self.mcp.aclose()
        await self.store.aclose()
        if self.deps.memory is not None and self.deps.memory.embedder is not None:
            await self.deps.memory.embedder.aclose()
        for provider in (*self._providers_to_close, *self._session_providers.values()):
            await provider.aclose()
        self._session_providers.clear()

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _LocalTrigger:
    """The local compressor's trigger in tokens, read by the Responses native-compaction gate
    (which must fire a little before it); the window is known only once it is resolved."""

    def __init__(self, config: CompressionConfig, settings: ProviderSettings) -> None:
        self._config = config
        self._settings = settings
        self.context_length = 0

    def __call__(self) -> int:
        from agent.context_compressor import resolve_trigger_ratio

        ratio = resolve_trigger_ratio(
            self._config,
            model=self._settings.model,
            provider=self._settings.provider,
            context_length=self.context_length,
        )
        return int(self.context_length * ratio)


def _calibrator(memory: WindowMemory, settings: ProviderSettings) -> TokenCalibrator:
    """One token calibration for all of this runtime's sessions, started from what an earlier
    process learned of the main model's server, and kept for the next one when it moves."""
    from agent.providers.window_memory import Calibration

    def keep(model: str, ratio: float, overhead: int) -> None:
        fit = Calibration(ratio=ratio, overhead=overhead)
        memory.remember_calibration(settings.base_url, model, fit)

    calibrator = TokenCalibrator(on_change=keep)
    known = memory.calibration(settings.base_url, settings.model)
    if known is not None:
        calibrator.seed(settings.model, known.ratio, known.overhead)
    return calibrator


class _WindowLearner:
    """`AgentDeps.on_window_learned`: remember a window an overflow error revealed, for this
    endpoint and model, and open later sessions (and the native-compaction gate) with it."""

    def __init__(self, memory: WindowMemory, settings: ProviderSettings, trigger: _LocalTrigger):
        self._memory = memory
        self._settings = settings
        self._trigger = trigger
        self.runtime: Runtime | None = None

    def __call__(self, model: str, tokens: int) -> None:
        self._memory.remember(self._settings.base_url, model, tokens)
        if model == self._settings.model:
            self._trigger.context_length = tokens
            if self.runtime is not None:
                self.runtime.context_length = tokens


def _media_intake(
    config: HermesConfig, media: MediaStore, environ: Mapping[str, str], context_length: int
) -> MediaIntake:
    """Files into messages; voice notes transcribed where `media.transcription` names a server."""
    from gateway.media_intake import MediaIntake
    from gateway.transcription import Transcriber

    spec = config.media.transcription
    transcriber = None
    if spec.base_url:
        key = environ.get(spec.api_key_env) if spec.api_key_env else None
        transcriber = Transcriber(
            spec.base_url, model=spec.model, api_key=key, timeout_s=spec.timeout_s
        )
    return MediaIntake(
        media=media,
        transcriber=transcriber,
        max_document_chars=config.media.max_document_chars,
        context_length=context_length,
    )


def _metered(
    provider: Provider, summarizer: Provider, metrics: MetricsRecorder
) -> tuple[Provider, Provider]:
    """The main provider and the summarizer, each call of either timed into `metrics`."""
    from cli.metering import MeteredProvider

    return (
        MeteredProvider(provider, metrics, role="main"),
        MeteredProvider(summarizer, metrics, role="summary"),
    )


def _metered_work(
    work: tuple[EndOfTurnWork, ...], metrics: MetricsRecorder | None
) -> tuple[EndOfTurnWork, ...]:
    if metrics is None:
        return work
    from agent.micro_compaction import MicroCompaction
    from cli.metering import MeteredWork

    return tuple(
        MeteredWork(w, metrics, "micro" if isinstance(w, MicroCompaction) else "batch")
        for w in work
    )


def _event_sink(metrics: MetricsRecorder, then: EventSink | None) -> EventSink:
    from cli.metering import event_sink

    return event_sink(metrics, then)


def _store_observer(metrics: MetricsRecorder | None) -> OpObserver | None:
    if metrics is None:
        return None
    from cli.metering import store_observer

    return store_observer(metrics)


def _autoraise_notices(
    config: HermesConfig, settings: ProviderSettings, home: Path, context_length: int
) -> list[str]:
    """The one-time Codex gpt-5.5 autoraise notice, when this start raised the trigger."""
    from agent.codex.autoraise import notice_for_autoraise
    from agent.context_compressor import resolve_model_threshold, resolve_trigger_ratio

    cfg = config.compression
    base = resolve_model_threshold(
        settings.model, cfg.threshold, cfg.model_thresholds, context_length
    )
    raised = resolve_trigger_ratio(
        cfg, model=settings.model, provider=settings.provider, context_length=context_length
    )
    if raised <= base:
        return []
    notice = notice_for_autoraise(
        home, raised=raised, notice_enabled=cfg.codex_gpt55_autoraise_notice
    )
    if notice:
        log.info("codex_autoraise_noticed", raised=raised)
    return [notice] if notice else []


def _memory_backend(
    config: HermesConfig, store: MemoryStore, environ: Mapping[str, str]
) -> MemoryBackend | None:
    """What memory runs on: the store, and an embeddings client when one is configured."""
    from agent.memory.view import MemoryBackend

    memory = config.memory
    if not memory.enabled:
        return None
    settings = memory.embeddings
    if settings is None:
        return MemoryBackend(store=store)
    from agent.memory.embeddings import OpenAIEmbedder

    key = settings.api_key or (environ.get(settings.api_key_env or "") or "") or "unused"
    embedder = OpenAIEmbedder(
        base_url=settings.base_url, api_key=key, model=settings.model, timeout_s=settings.timeout_s
    )
    return MemoryBackend(store=store, embedder=embedder)


def _build_tools(
    config: HermesConfig, mcp: McpHub | None, environ: Mapping[str, str]
) -> ToolRegistry:
    """The enabled built-ins, plus the MCP servers' tools (deferred past `mcp.defer_after`)."""
    from agent.archive.recall import recall_tool
    from agent.jobs.manage import owner_zone
    from agent.jobs.schedule_tool import schedule_tool
    from agent.memory.tool import memory_tool
    from agent.tools.builtin import builtin_tools, web_tools
    from agent.tools.read_document import read_document_tool
    from agent.tools.send_file import send_file_tool
    from agent.tools.session_search import session_search_tool

    wants_web = not {"web_fetch", "web_search"}.isdisjoint(config.tools.enabled)
    web = web_tools(config.web, environ) if wants_web else []  # httpx only when asked for
    jobs_tool = schedule_tool(lambda owner: owner_zone(config, owner))
    everything = ToolRegistry(
        [
            *builtin_tools(),
            session_search_tool(),
            recall_tool(),
            memory_tool(),
            *web,
            jobs_tool,
            read_document_tool(),
            send_file_tool(),
        ],
        sources=() if mcp is None else (mcp,),
        defer_after=None if mcp is None else config.mcp.defer_after,
    )
    return everything.subset(config.tools.enabled)


async def _start_mcp(config: HermesConfig, home: Path, environ: Mapping[str, str]) -> McpHub | None:
    """The enabled MCP servers, started (a server that cannot start is a notice, not a crash)."""
    if not config.mcp.enabled_servers():
        return None
    from agent.mcp import McpHub

    return await McpHub.start(config.mcp, environ, log_dir=home / "logs")


def _mcp_notices(mcp: McpHub | None) -> list[str]:
    if mcp is None:
        return []
    return [
        f"MCP server {s.name} is not available ({s.error}); its tools are absent while it "
        "retries in the background."
        for s in mcp.statuses()
        if s.state != "connected"
    ]


def _default_end_of_turn(
    config: HermesConfig, *, summarizer: Provider, summary_model: str
) -> tuple[EndOfTurnWork, ...]:
    """A batch compaction prepared ahead of the threshold, else micro-compaction (both on by
    default), summarizing with the `auxiliary.compression` model."""
    cfg = config.compression
    if not cfg.enabled:
        return ()
    from agent.micro_compaction import MicroCompaction
    from agent.prepared_compaction import SpeculativeCompaction

    works: list[EndOfTurnWork] = []
    if cfg.speculative:
        works.append(SpeculativeCompaction(cfg))
    if cfg.micro_compact:
        works.append(
            MicroCompaction(
                cfg,
                summarizer=summarizer,
                summary_model=summary_model,
                summary_timeout_s=config.auxiliary.compression.timeout_s,
            )
        )
    return tuple(works)
