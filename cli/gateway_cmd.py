"""`hermes gateway run` and the interactive `hermes chat`: a runtime, a runner, its front ends."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from agent.config import HermesConfig
from agent.errors import ConfigError, HermesError
from cli.runtime import Runtime

__all__ = ["build_adapters", "run_gateway", "run_terminal_chat"]

log = structlog.get_logger(__name__)


def build_adapters(config: HermesConfig, environ: Mapping[str, str]) -> list[Any]:
    """The enabled push platforms (Telegram, Discord), with their tokens resolved."""
    adapters: list[Any] = []
    tg = config.gateway.telegram
    if tg.enabled:
        from gateway.platforms.telegram import TelegramAdapter

        token = tg.token or environ.get("TELEGRAM_BOT_TOKEN")
        if not token:
            raise ConfigError(
                "Telegram is enabled but has no token: set gateway.telegram.token or "
                "TELEGRAM_BOT_TOKEN",
                key="gateway.telegram.token",
            )
        adapters.append(
            TelegramAdapter(
                token=token,
                base_url=tg.base_url,
                mode=tg.mode,
                webhook_url=tg.webhook_url,
                webhook_listen=tg.webhook_listen,
                webhook_port=tg.webhook_port,
            )
        )
    dc = config.gateway.discord
    if dc.enabled:
        from gateway.platforms.discord import DiscordAdapter

        token = dc.token or environ.get("DISCORD_BOT_TOKEN")
        if not token:
            raise ConfigError(
                "Discord is enabled but has no token: set gateway.discord.token or "
                "DISCORD_BOT_TOKEN",
                key="gateway.discord.token",
            )
        adapters.append(DiscordAdapter(token=token, channels=dc.channels))
    return adapters


async def run_gateway(
    config: HermesConfig,
    home: Path,
    environ: Mapping[str, str],
    *,
    stop: asyncio.Event | None = None,
) -> int:
    """Start every enabled platform; SIGTERM/SIGINT finish turns in flight, then exit 0."""
    from gateway.platforms.http_api import HttpApiServer
    from gateway.run import GatewayRunner

    stop = stop or asyncio.Event()
    adapters = build_adapters(config, environ)
    http_cfg = config.gateway.http
    if not adapters and not http_cfg.enabled:
        raise ConfigError(
            "no platform is enabled: set gateway.telegram.enabled, gateway.discord.enabled or "
            "gateway.http.enabled to true",
            key="gateway",
        )
    async with await Runtime.start(config, home, environ) as runtime:
        for notice in runtime.notices:
            print(notice, file=sys.stderr)
        runner = GatewayRunner(runtime, adapters)
        http = None
        if http_cfg.enabled:
            http = HttpApiServer(
                runner,
                host=http_cfg.host,
                port=http_cfg.port,
                api_key=http_cfg.api_key or environ.get("HERMES_API_KEY"),
            )
        loop = asyncio.get_running_loop()
        handled = _install_stop_signals(loop, stop)
        try:
            await runner.start()
            try:
                if http is not None:
                    await http.start()
                names = [a.name for a in adapters] + (["http"] if http else [])
                print(
                    f"hermes gateway running: {', '.join(names)} (Ctrl-C to stop)", file=sys.stderr
                )
                log.info("gateway_started", platforms=names)
                await stop.wait()
                log.info("gateway_stopping", timeout_s=config.gateway.shutdown_timeout_s)
            finally:
                # Turns in flight finish first (bounded), so their HTTP callers get an answer.
                await runner.stop()
                if http is not None:
                    await http.stop()
        finally:
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
) -> int:
    """The interactive terminal chat, through the same runner as every other platform."""
    from rich.console import Console

    from gateway.platforms.terminal import TerminalChat
    from gateway.run import GatewayRunner

    console = Console()
    holder: dict[str, TerminalChat] = {}

    def on_event(name: str, payload: dict[str, Any]) -> None:
        if "chat" in holder:
            holder["chat"].on_event(name, payload)

    async def approve(description: str) -> bool:
        return await holder["chat"].approve(description) if "chat" in holder else False

    try:
        runtime = await Runtime.start(
            config,
            home,
            environ,
            model_override=model,
            approver=approve if sys.stdin.isatty() else None,
            on_event=on_event,
        )
    except HermesError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1
    async with runtime:
        if resume and await runtime.store.get_session(resume) is None:
            print(
                f"hermes: no session {resume!r}; `hermes sessions list` shows the ids",
                file=sys.stderr,
            )
            return 2
        runner = GatewayRunner(runtime)
        chat = TerminalChat(
            runner, console=console, history_file=home / "chat_history", session_id=resume
        )
        holder["chat"] = chat
        banner = "\n".join(
            [f"Hermes · {runtime.settings.model}", runtime.caching_status, *runtime.notices]
        )
        await chat.run(banner=banner)
        await runner.stop()
    return 0


def _install_stop_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> list[int]:
    """SIGTERM and SIGINT set `stop`; returns the signals handled (none off the main thread)."""
    handled: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    return handled
