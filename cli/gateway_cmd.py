"""`hermes gateway run` and the interactive `hermes chat`: a runtime, a runner, its front ends."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from agent.config import HermesConfig
from agent.errors import ConfigError, HermesError
from cli.runtime import Runtime
from gateway.metrics import NO_METRICS
from state import SessionStore

if TYPE_CHECKING:
    from agent.events import AgentEvent
    from gateway.prometheus import MetricsServer, PrometheusMetrics
    from gateway.run import GatewayRunner
    from gateway.scheduler import JobScheduler

__all__ = ["build_adapters", "listening_lines", "run_gateway", "run_terminal_chat"]

log = structlog.get_logger(__name__)


def build_adapters(
    config: HermesConfig, environ: Mapping[str, str], *, store: SessionStore | None = None
) -> list[Any]:
    """The enabled push platforms (Telegram, Discord), with their tokens resolved.

    With `store`, the ones that may run on one worker only (Telegram polling, the Discord
    gateway) are elected through it (`gateway.election`); webhooks run on every worker.
    """
    factories = _factories(config, environ)
    if store is None:
        return [factory() for factory, _ in factories]
    from gateway.election import ElectedAdapter

    return [
        ElectedAdapter(factory, locks=store.locks) if elected else factory()
        for factory, elected in factories
    ]


def _factories(
    config: HermesConfig, environ: Mapping[str, str]
) -> list[tuple[Callable[[], Any], bool]]:
    """(build the adapter, whether it runs on one worker only) per enabled push platform."""
    factories: list[tuple[Callable[[], Any], bool]] = []
    tg = config.gateway.telegram
    if tg.enabled:
        factories.append((_telegram_factory(config, environ), tg.mode == "polling"))
    if config.gateway.discord.enabled:
        factories.append((_discord_factory(config, environ), True))
    return factories


def _telegram_factory(config: HermesConfig, environ: Mapping[str, str]) -> Callable[[], Any]:
    from gateway.platforms.telegram import TelegramAdapter

    tg = config.gateway.telegram
    token = tg.token or environ.get("TELEGRAM_BOT_TOKEN")
    if not token:
        raise ConfigError(
            "Telegram is enabled but has no token: set gateway.telegram.token or "
            "TELEGRAM_BOT_TOKEN",
            key="gateway.telegram.token",
        )
    return functools.partial(
        TelegramAdapter,
        token=token,
        base_url=tg.base_url,
        mode=tg.mode,
        webhook_url=tg.webhook_url,
        webhook_listen=tg.webhook_listen,
        webhook_port=tg.webhook_port,
        group_mode=tg.group_mode,
        group_chats=tg.group_chats,
    )


def _discord_factory(config: HermesConfig, environ: Mapping[str, str]) -> Callable[[], Any]:
    from gateway.platforms.discord import DiscordAdapter

    dc = config.gateway.discord
    token = dc.token or environ.get("DISCORD_BOT_TOKEN")
    if not token:
        raise ConfigError(
            "Discord is enabled but has no token: set gateway.discord.token or DISCORD_BOT_TOKEN",
            key="gateway.discord.token",
        )
    return functools.partial(
        DiscordAdapter, token=token, channels=dc.channels, group_mode=dc.group_mode
    )


async def run_gateway(
    config: HermesConfig,
    home: Path,
    environ: Mapping[str, str],
    *,
    stop: asyncio.Event | None = None,
) -> int:
    """Start every enabled platform; SIGTERM/SIGINT finish turns in flight, then exit 0."""
    from gateway.http import HttpApiServer
    from gateway.run import GatewayRunner

    stop = stop or asyncio.Event()
    _factories(config, environ)  # a missing token fails before anything starts
    http_cfg = config.gateway.http
    gw = config.gateway
    if not (gw.telegram.enabled or gw.discord.enabled or http_cfg.enabled):
        raise ConfigError(
            "no platform is enabled: set gateway.telegram.enabled, gateway.discord.enabled or "
            "gateway.http.enabled to true",
            key="gateway",
        )
    _warn_unsandboxed_terminal(config)
    workspace = _gateway_workspace(config, home)
    metrics, metrics_server = _metrics(config)
    async with await Runtime.start(
        config, home, environ, workspace=workspace, metrics=metrics
    ) as runtime:
        for notice in runtime.notices:
            print(notice, file=sys.stderr)
        adapters = build_adapters(config, environ, store=runtime.store)
        runner = GatewayRunner(runtime, adapters, metrics=metrics or NO_METRICS)
        http = None
        if http_cfg.enabled:
            http = HttpApiServer(
                runner,
                host=http_cfg.host,
                port=http_cfg.port,
                api_key=http_cfg.api_key or environ.get("HERMES_API_KEY"),
                environ=environ,
            )
        loop = asyncio.get_running_loop()
        handled = _install_stop_signals(loop, stop)
        try:
            if metrics_server is not None:
                metrics_cfg = config.gateway.metrics
                await _listen(
                    metrics_server, metrics_cfg.host, metrics_cfg.port, key="gateway.metrics.port"
                )
            await runner.start()
            scheduler = _scheduler(config, runner, runtime.store, metrics)
            try:
                if scheduler is not None:
                    await scheduler.start()
                if http is not None:
                    await _listen(http, http_cfg.host, http_cfg.port, key="gateway.http.port")
                names = [a.name for a in adapters] + (["http"] if http else [])
                if metrics_server is not None:
                    print(f"hermes metrics: {metrics_server.url}", file=sys.stderr)
                print(
                    f"hermes gateway running: {', '.join(names)} (Ctrl-C to stop)", file=sys.stderr
                )
                for line in listening_lines(config, http_port=http.port if http else None):
                    print(f"  {line}", file=sys.stderr)
                log.info("gateway_started", platforms=names)
                await stop.wait()
                log.info("gateway_stopping", timeout_s=config.gateway.shutdown_timeout_s)
            finally:
                if scheduler is not None:  # job runs in flight finish first (bounded)
                    await scheduler.stop(timeout_s=config.gateway.shutdown_timeout_s)
                # Turns in flight finish first (bounded), so their HTTP callers get an answer.
                await runner.stop()
                if http is not None:
                    await http.stop()
        finally:
            if metrics_server is not None:
                await metrics_server.stop()
            for sig in handled:
                loop.remove_signal_handler(sig)
    log.info("gateway_stopped")
    return 0


async def run_terminal_chat(
    config: HermesConfig,
    home: Path,
    environ: Mapping[str, str],
    *,
    model: str | None = None,
    resume: str | None = None,
    newest: bool = False,
) -> int:
    """The interactive terminal chat, through the same runner as every other platform.

    A new session unless `resume` names one (`chat_sessions.PICK`: pick it) or `newest`."""
    from rich.console import Console

    from cli.chat_sessions import starting_session
    from gateway.platforms.terminal import TerminalChat
    from gateway.run import GatewayRunner

    console = Console()
    holder: dict[str, TerminalChat] = {}

    def on_event(event: AgentEvent) -> None:
        if "chat" in holder:
            holder["chat"].on_event(event)

    interactive = sys.stdin.isatty()
    try:
        runtime = await Runtime.start(
            config, home, environ, model_override=model, on_event=on_event
        )
    except HermesError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1
    async with runtime:
        try:
            session_id = await starting_session(
                runtime.store, resume=resume, newest=newest, interactive=interactive
            )
        except HermesError as exc:
            print(f"hermes: {exc}", file=sys.stderr)
            return 2
        runner = GatewayRunner(runtime)
        chat = TerminalChat(
            runner,
            console=console,
            history_file=home / "chat_history",
            session_id=session_id,
            can_prompt=interactive,
            model=runtime.settings.model,
        )
        holder["chat"] = chat
        banner = "\n".join(
            [f"Hermes · {runtime.settings.model}", runtime.caching_status, *runtime.notices]
        )
        try:
            await chat.run(banner=banner)
        finally:
            await runner.stop()
            holder.pop("chat", None)
    return 0


def listening_lines(config: HermesConfig, *, http_port: int | None) -> list[str]:
    """Where each enabled platform listens or connects, one line each (pure)."""
    gw = config.gateway
    lines = []
    if gw.http.enabled and http_port is not None:
        lines.append(
            f"http: http://{gw.http.host}:{http_port}/v1 (OpenAI-compatible; POST "
            "/v1/chat/completions)"
        )
    tg = gw.telegram
    if tg.enabled and tg.mode == "webhook":
        lines.append(
            f"telegram: webhook on {tg.webhook_listen}:{tg.webhook_port} for {tg.webhook_url}"
        )
    elif tg.enabled:
        lines.append("telegram: long polling (no port to open)")
    if gw.discord.enabled:
        lines.append("discord: gateway connection (no port to open)")
    return lines


async def _listen(server: Any, host: str, port: int, *, key: str) -> None:
    """Start a listening server; a port already taken is one sentence, not a traceback."""
    import errno

    try:
        await server.start()
    except OSError as exc:
        await server.stop()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is already in use (another hermes gateway?); stop it "
                f"or set {key} to a free port",
                key=key,
            ) from None
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; check {key} and its host",
            key=key,
        ) from None


def _warn_unsandboxed_terminal(config: HermesConfig) -> None:
    """Remote callers with a shell and no sandbox: say so once at start-up."""
    from gateway.principals import remote_terminal_grants

    grants = remote_terminal_grants(config)
    if grants and config.tools.terminal.sandbox == "none" and "terminal" in config.tools.enabled:
        print(
            f"hermes: warning: {', '.join(grants)} grant the terminal to remote callers without "
            "a sandbox; scripts they write run with your rights (set tools.terminal.sandbox: "
            "auto, the default)",
            file=sys.stderr,
        )
        log.warning("terminal_granted_unsandboxed", grants=grants)


def _metrics(config: HermesConfig) -> tuple[PrometheusMetrics | None, MetricsServer | None]:
    """The metrics recorder and its `/metrics` server, when `gateway.metrics.enabled`."""
    settings = config.gateway.metrics
    if not settings.enabled:
        return None, None
    from gateway.prometheus import MetricsServer, PrometheusMetrics

    metrics = PrometheusMetrics(prices=config.pricing)
    return metrics, MetricsServer(metrics, host=settings.host, port=settings.port)


def _scheduler(
    config: HermesConfig, runner: GatewayRunner, store: Any, metrics: PrometheusMetrics | None
) -> JobScheduler | None:
    """The worker's job scheduler, when `schedule.enabled` and the store keeps jobs."""
    if not config.schedule.enabled or getattr(store, "jobs", None) is None:
        return None
    from gateway.scheduler import JobScheduler

    return JobScheduler(runner, store.jobs, config, metrics=metrics or NO_METRICS)


def _gateway_workspace(config: HermesConfig, home: Path) -> Path:
    """`tools.workspace`, else HERMES_HOME/workspace: remote callers never get the cwd."""
    return Path(config.tools.workspace or home / "workspace").expanduser()


def _install_stop_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> list[int]:
    """SIGTERM and SIGINT set `stop`; returns the signals handled (none off the main thread)."""
    handled: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    return handled
